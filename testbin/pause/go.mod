// The sandbox ("pause") process for the real-kubelet test (scripts/k8s-testbin.sh
// builds it; scripts/image.sh packages it): standard library only.
module local.invalid/pause

go 1.24
