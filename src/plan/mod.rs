pub mod provisioner_hash;
