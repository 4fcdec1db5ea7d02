// Command tpu-provisioner-hash prints test vectors for slicectl's port of
// tpu-provisioner's node-pool selective hash (src/plan/provisioner_hash.rs).
//
// The hash below follows tpu-provisioner's nodePoolSelectiveHash
// (internal/cloud/gke.go): if the pool's labels already carry
// google.com/tpu-provisioner-nodepool-hash, that value is the hash; otherwise
// a container/v1beta1 NodePool holding only config.{spot, labels, machineType,
// reservationAffinity} is encoded with encoding/json, hashed with FNV-1a 32,
// and the decimal Sum32 is encoded with k8s rand.SafeEncodeString.
//
// Usage: GOTOOLCHAIN=local go run . > vectors.json
package main

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"os"

	containerv1beta1 "google.golang.org/api/container/v1beta1"
	"k8s.io/apimachinery/pkg/util/rand"
)

const labelNodePoolHash = "google.com/tpu-provisioner-nodepool-hash"

// selectiveHash mirrors tpu-provisioner's nodePoolSelectiveHash.
func selectiveHash(np *containerv1beta1.NodePool) (hash string, encoded string, sum uint32, err error) {
	if np.Config != nil && np.Config.Labels != nil {
		if h, ok := np.Config.Labels[labelNodePoolHash]; ok {
			return h, "", 0, nil
		}
	}
	subset := &containerv1beta1.NodePool{
		Config: &containerv1beta1.NodeConfig{
			Spot:                np.Config.Spot,
			Labels:              np.Config.Labels,
			MachineType:         np.Config.MachineType,
			ReservationAffinity: np.Config.ReservationAffinity,
		},
	}
	data, err := json.Marshal(subset)
	if err != nil {
		return "", "", 0, err
	}
	h := fnv.New32a()
	h.Write(data)
	return rand.SafeEncodeString(fmt.Sprint(h.Sum32())), string(data), h.Sum32(), nil
}

type reservation struct {
	ConsumeReservationType string   `json:"consumeReservationType"`
	Key                    *string  `json:"key"`
	Values                 []string `json:"values"`
}

type vector struct {
	Name                string            `json:"name"`
	Labels              map[string]string `json:"labels"`
	MachineType         string            `json:"machineType"`
	ReservationAffinity *reservation      `json:"reservationAffinity"`
	Spot                bool              `json:"spot"`
	// JSON is the exact encoding that was hashed ("" when the hash label short-circuits).
	JSON  string `json:"json"`
	Sum32 uint32 `json:"sum32"`
	Hash  string `json:"hash"`
}

func strp(s string) *string { return &s }

// simpleLabels are the labels of tpu-provisioner's Test_nodePoolSelectiveHash "simple case".
func simpleLabels() map[string]string {
	return map[string]string{
		"google.com/nodepool-manager":                 "tpu-provisioner",
		"google.com/tpu-provisioner-jobset-name":      "jobset-test",
		"google.com/tpu-provisioner-jobset-namespace": "default",
		"google.com/tpu-provisioner-parent-kind":      "job",
		"google.com/tpu-provisioner-parent-name":      "jobset-test-job-1-0",
		"google.com/tpu-provisioner-parent-namespace": "default",
	}
}

func main() {
	specific := func(values ...string) *reservation {
		return &reservation{"SPECIFIC_RESERVATION", strp("compute.googleapis.com/reservation-name"), values}
	}
	withSpot := simpleLabels()
	cases := []vector{
		{Name: "simple case", Labels: simpleLabels(), MachineType: "ct5p-hightpu-4t"},
		{Name: "simple case, specific reservation and spot", Labels: withSpot, MachineType: "ct5p-hightpu-4t",
			ReservationAffinity: specific("tpu-rsv"), Spot: true},
		{Name: "empty config"},
		{Name: "empty labels map, machine type only", Labels: map[string]string{}, MachineType: "ct6e-standard-4t"},
		{Name: "spot only", Spot: true},
		{Name: "cross-project reservation", Labels: map[string]string{"team": "llm"}, MachineType: "tpu7x-standard-4t",
			ReservationAffinity: specific("projects/other-project/reservations/tpu7x-rsv")},
		{Name: "any reservation, no key or values", MachineType: "ct5lp-hightpu-1t",
			ReservationAffinity: &reservation{ConsumeReservationType: "ANY_RESERVATION"}},
		{Name: "empty reservation affinity object", MachineType: "ct5lp-hightpu-4t",
			ReservationAffinity: &reservation{Key: strp("")}},
		{Name: "HTML-escaped characters in labels", Labels: map[string]string{
			"a&b": "<x>", "note": "R&D <team> & co", "z": "plain"}, MachineType: "ct6e-standard-8t", Spot: true},
		{Name: "control characters, quotes, unicode and line separators", Labels: map[string]string{
			"quote\"back\\slash": "tab\tnl\ncr\rbs\bff\fnul\x00esc\x1bdel\x7f",
			"unicode":            "caf\u00e9 \u65e5\u672c \U0001F680 ls\u2028ps\u2029",
			"Upper":              "sorted-before-lower"}, MachineType: "ct4p-hightpu-4t"},
		{Name: "existing hash label short-circuits", Labels: map[string]string{
			"google.com/nodepool-manager": "tpu-provisioner", labelNodePoolHash: "precomputed"}, MachineType: "ct5p-hightpu-4t"},
	}
	for i := range cases {
		c := &cases[i]
		cfg := &containerv1beta1.NodeConfig{Labels: c.Labels, MachineType: c.MachineType, Spot: c.Spot}
		if r := c.ReservationAffinity; r != nil {
			cfg.ReservationAffinity = &containerv1beta1.ReservationAffinity{ConsumeReservationType: r.ConsumeReservationType, Values: r.Values}
			if r.Key != nil {
				cfg.ReservationAffinity.Key = *r.Key
			}
		}
		hash, data, sum, err := selectiveHash(&containerv1beta1.NodePool{Config: cfg})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		c.Hash, c.JSON, c.Sum32 = hash, data, sum
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(cases); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
