#![cfg(test)]
use super::*;
use crate::cloud::fake::FakeCloud;

#[tokio::test]
async fn a_location_is_listed_once_per_observation() {
    let fake = Arc::new(FakeCloud::default());
    let shared = SharedListings::new(fake.clone());
    let (a, b) = tokio::join!(
        shared.list_operations_shared("p", "us-central1"),
        shared.list_operations_shared("p", "us-central1")
    );
    a.unwrap();
    b.unwrap();
    shared
        .list_operations_shared("p", "us-east5")
        .await
        .unwrap();
    let lists = fake
        .calls()
        .iter()
        .filter(|c| c.starts_with("list_operations"))
        .count();
    assert_eq!(lists, 2, "{:?}", fake.calls());
}
