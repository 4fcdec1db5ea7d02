// Reads Kubernetes objects as JSON (one object, a list with "items", or a
// JSON array) on stdin and prints, for each, what the real kstatus library
// (sigs.k8s.io/cli-utils/pkg/kstatus/status, as Flux's health checks use it)
// computes: one JSON line {"name", "status", "message"}. See README.md.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

type result struct {
	Name    string `json:"name"`
	Status  string `json:"status"`
	Message string `json:"message"`
}

func main() {
	if err := run(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "kstatus:", err)
		os.Exit(1)
	}
}

func run(in io.Reader, out io.Writer) error {
	data, err := io.ReadAll(in)
	if err != nil {
		return fmt.Errorf("read stdin: %w", err)
	}
	var objects []map[string]interface{}
	if err := json.Unmarshal(data, &objects); err != nil {
		var one map[string]interface{}
		if err := json.Unmarshal(data, &one); err != nil {
			return fmt.Errorf("stdin is neither a JSON object nor an array: %w", err)
		}
		if items, ok := one["items"].([]interface{}); ok {
			for i, it := range items {
				m, ok := it.(map[string]interface{})
				if !ok {
					return fmt.Errorf("items[%d] is not an object", i)
				}
				objects = append(objects, m)
			}
		} else {
			objects = []map[string]interface{}{one}
		}
	}
	enc := json.NewEncoder(out)
	for _, o := range objects {
		// Re-decode through apimachinery so numbers are int64, as they are
		// in a client-go object (encoding/json would give float64).
		raw, err := json.Marshal(o)
		if err != nil {
			return err
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(raw); err != nil {
			return fmt.Errorf("decode object: %w", err)
		}
		r, err := status.Compute(u)
		if err != nil {
			return fmt.Errorf("compute %s: %w", u.GetName(), err)
		}
		if err := enc.Encode(result{Name: u.GetName(), Status: r.Status.String(), Message: r.Message}); err != nil {
			return err
		}
	}
	return nil
}
