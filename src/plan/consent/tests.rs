use std::collections::BTreeSet;

use jiff::Timestamp;

use super::*;
use crate::spec::disruption::Window;
use crate::spec::model::DisruptionWindow;

const EVERY: [Step; 9] = [
    Step::Delete,
    Step::Replace,
    Step::Moved,
    Step::ScaleDown,
    Step::NodeLostRecreate,
    Step::Drain,
    Step::Eviction,
    Step::DevicePluginRemoval,
    Step::SharedResourceDelete,
];

fn pod(name: &str, dnd: bool) -> BoundPod {
    BoundPod {
        namespace: "ml".into(),
        name: name.into(),
        owner: Some("jobset ml/train".into()),
        do_not_disrupt: dnd,
    }
}

fn policy(when_busy: WhenBusy) -> Policy {
    Policy {
        when_busy,
        ..Policy::default()
    }
}

fn at(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn ask<'a>(step: Step, known: Known<'a>, policy: &'a Policy) -> Ask<'a> {
    Ask {
        step,
        subject: "slice replica a[1]",
        known,
        policy,
        budget: None,
        mode: PlanMode::Apply,
        disrupt: false,
        now: at("2026-01-05T12:00:00Z"),
    }
}

fn code(c: &Consent) -> &'static str {
    match c {
        Consent::Held { code, .. } => code,
        Consent::Go(_) => "go",
    }
}

#[test]
fn every_step_kind_is_asked_and_an_unknown_replica_is_held() {
    let p = policy(WhenBusy::Replace);
    for step in EVERY {
        let c = consent(&ask(
            step,
            Known::Unknown("its Pods could not be listed"),
            &p,
        ));
        assert_eq!(code(&c), "busy_unknown", "{step:?}");
        let Consent::Held { message, .. } = c else {
            unreachable!()
        };
        assert!(
            message.contains("slice replica a[1]")
                && message.contains("its Pods could not be listed"),
            "{message}"
        );
        // Only the explicit override lets it go.
        let mut forced = ask(step, Known::Unknown("x"), &p);
        forced.mode = PlanMode::Destroy;
        assert_eq!(
            code(&consent(&forced)),
            "busy_unknown",
            "destroy alone does not force"
        );
        forced.disrupt = true;
        assert_eq!(consent(&forced), Consent::Go(Go::Forced), "{step:?}");
    }
}

#[test]
fn every_step_kind_goes_when_idle_and_follows_the_policy_when_busy() {
    let pods = [pod("w-0", false)];
    for step in EVERY {
        assert_eq!(
            consent(&ask(step, Known::Idle, &Policy::default())),
            Consent::Go(Go::Idle)
        );
        let wait = Policy::default();
        assert_eq!(
            code(&consent(&ask(step, Known::Running(&pods), &wait))),
            "busy"
        );
        let drain = policy(WhenBusy::Drain);
        assert_eq!(
            consent(&ask(step, Known::Running(&pods), &drain)),
            Consent::Go(Go::Drain)
        );
        let replace = policy(WhenBusy::Replace);
        assert_eq!(
            consent(&ask(step, Known::Running(&pods), &replace)),
            Consent::Go(Go::Replace)
        );
    }
}

#[test]
fn do_not_disrupt_blocks_even_a_drain_but_not_the_override() {
    let pods = [pod("w-0", false), pod("w-1", true)];
    let drain = policy(WhenBusy::Drain);
    let c = consent(&ask(Step::Eviction, Known::Running(&pods), &drain));
    assert_eq!(code(&c), "do_not_disrupt");
    let mut forced = ask(Step::Delete, Known::Running(&pods), &drain);
    forced.mode = PlanMode::Destroy;
    forced.disrupt = true;
    assert_eq!(consent(&forced), Consent::Go(Go::Forced));
    // `--disrupt` means nothing outside destroy.
    forced.mode = PlanMode::Apply;
    assert_eq!(code(&consent(&forced)), "do_not_disrupt");
}

#[test]
fn a_window_is_judged_at_the_time_given_for_every_eviction() {
    let w = Window::parse(&DisruptionWindow {
        schedule: "0 2 * * *".into(),
        time_zone: None,
        duration: "1h".into(),
    })
    .unwrap();
    let p = Policy {
        when_busy: WhenBusy::Drain,
        windows: vec![w],
        ..Policy::default()
    };
    let pods = [pod("w-0", false)];
    let mut a = ask(Step::Eviction, Known::Running(&pods), &p);
    a.now = at("2026-01-05T02:30:00Z");
    assert_eq!(consent(&a), Consent::Go(Go::Drain));
    a.now = at("2026-01-05T03:00:01Z");
    let c = consent(&a);
    assert_eq!(code(&c), "outside_window");
    let Consent::Held { message, .. } = c else {
        unreachable!()
    };
    assert!(message.contains("2026-01-06T02:00:00Z"), "{message}");
    // An idle replica is changed at any time.
    a.known = Known::Idle;
    assert_eq!(consent(&a), Consent::Go(Go::Idle));
}

#[test]
fn a_budget_in_use_holds_others_but_not_the_drain_that_holds_it() {
    let p = Policy {
        budget: Some(1),
        ..policy(WhenBusy::Drain)
    };
    let pods = [pod("w-0", false)];
    let used: BTreeSet<String> = ["b[0]".to_owned()].into();
    let mut a = ask(Step::Replace, Known::Running(&pods), &p);
    a.budget = Some(Budget {
        target: "t",
        limit: 1,
        used_by: &used,
        mine: false,
    });
    let c = consent(&a);
    assert_eq!(code(&c), "budget");
    a.budget = Some(Budget {
        target: "t",
        limit: 1,
        used_by: &used,
        mine: true,
    });
    assert_eq!(consent(&a), Consent::Go(Go::Drain));
}

#[test]
fn a_shared_resource_in_use_is_kept_whatever_the_override() {
    let by = ["MIG b-0".to_owned()];
    let p = Policy::default();
    for step in [Step::SharedResourceDelete, Step::DevicePluginRemoval] {
        let mut a = ask(step, Known::InUse(&by), &p);
        a.mode = PlanMode::Destroy;
        a.disrupt = true;
        let c = consent(&a);
        assert_eq!(code(&c), "in_use");
        assert_eq!(
            consent(&ask(step, Known::InUse(&[]), &p)),
            Consent::Go(Go::Idle)
        );
    }
}
