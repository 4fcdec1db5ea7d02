// Reads Kubernetes objects as JSON (one object, a list with "items", or a
// JSON array) on stdin and prints, for each, one JSON line
// {"name", "status", "message"}:
//
//	kstatus                  what the real kstatus library
//	                         (sigs.k8s.io/cli-utils/pkg/kstatus/status, as
//	                         Flux's health checks use it) computes;
//	kstatus argocd SCRIPT    the health Argo CD gives it with the Lua health
//	                         check SCRIPT in argocd-cm, evaluated with
//	                         gopher-lua as Argo CD runs it (argocd.go).
//
// See README.md.
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
	var err error
	switch {
	case len(os.Args) == 1:
		err = run(os.Stdin, os.Stdout)
	case len(os.Args) == 3 && os.Args[1] == "argocd":
		err = runArgocd(os.Args[2], os.Stdin, os.Stdout)
	default:
		err = fmt.Errorf("usage: kstatus [argocd SCRIPT.lua] < objects.json")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "kstatus:", err)
		os.Exit(1)
	}
}

func run(in io.Reader, out io.Writer) error {
	objects, err := readObjects(in)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(out)
	for _, u := range objects {
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

func runArgocd(scriptPath string, in io.Reader, out io.Writer) error {
	script, err := os.ReadFile(scriptPath)
	if err != nil {
		return fmt.Errorf("read the health script: %w", err)
	}
	objects, err := readObjects(in)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(out)
	for _, u := range objects {
		h := argocdHealth(u, string(script))
		if err := enc.Encode(result{Name: u.GetName(), Status: h.Status, Message: h.Message}); err != nil {
			return err
		}
	}
	return nil
}

// readObjects decodes stdin's objects through apimachinery, so numbers are
// int64 as they are in a client-go object (what both kstatus and Argo CD's
// cluster cache hold; encoding/json alone would give float64).
func readObjects(in io.Reader) ([]*unstructured.Unstructured, error) {
	data, err := io.ReadAll(in)
	if err != nil {
		return nil, fmt.Errorf("read stdin: %w", err)
	}
	var objects []map[string]interface{}
	if err := json.Unmarshal(data, &objects); err != nil {
		var one map[string]interface{}
		if err := json.Unmarshal(data, &one); err != nil {
			return nil, fmt.Errorf("stdin is neither a JSON object nor an array: %w", err)
		}
		if items, ok := one["items"].([]interface{}); ok {
			for i, it := range items {
				m, ok := it.(map[string]interface{})
				if !ok {
					return nil, fmt.Errorf("items[%d] is not an object", i)
				}
				objects = append(objects, m)
			}
		} else {
			objects = []map[string]interface{}{one}
		}
	}
	var out []*unstructured.Unstructured
	for _, o := range objects {
		raw, err := json.Marshal(o)
		if err != nil {
			return nil, err
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(raw); err != nil {
			return nil, fmt.Errorf("decode object: %w", err)
		}
		out = append(out, u)
	}
	return out, nil
}
