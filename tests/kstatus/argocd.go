// Evaluates an Argo CD resource health Lua script the way Argo CD does, for
// `kstatus argocd SCRIPT.lua`. This reproduces, with only
// github.com/yuin/gopher-lua (the version Argo CD's go.mod pins), the code in
// github.com/argoproj/argo-cd (read at commit 37ee0097cf85, August 2026):
//
//   - gitops-engine/pkg/health/health.go, GetResourceHealth: an object being
//     deleted is Progressing "Pending deletion" before any script runs; a
//     script error is Unknown with the error as message.
//   - util/lua/lua.go, VM.runLuaWithResourceActionParameters (through
//     VM.runLua): the LState, the libraries opened, the globals `actionParams`
//     and `obj`, the 1 s context, the stack trace stripped from run errors.
//   - util/lua/lua.go, VM.ExecuteHealthLua: the returned value's validation.
//   - util/lua/lua.go, decodeValue: how `obj` becomes a Lua table.
//   - util/lua/oslib_safe.go: the "safe" os (OpenSafeOs, SafeOsLoader here;
//     the rest copied in argocd_oslib.go).
//   - util/settings/settings.go, appendResourceOverridesFromSplitKeys, and
//     util/lua/lua.go, VM.GetHealthScript: a script from the argocd-cm key
//     resource.customizations.health.<group>_<kind> runs with UseOpenLibs
//     false unless resource.customizations.useOpenLibs.<group>_<kind> is
//     "true". SliceStatus's check sets no such key, so it runs without
//     string, math or the full os library, as here.
//
// Argo CD encodes the returned table with layeh.com/gopher-json's Encode; its
// encoder (public domain) is reproduced below as luaToJSON so that gopher-lua
// stays the only dependency.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	lua "github.com/yuin/gopher-lua"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// healthStatus is gitops-engine's health.HealthStatus.
type healthStatus struct {
	Status  string `json:"status,omitempty"`
	Message string `json:"message,omitempty"`
}

// Argo CD's constants (util/lua/lua.go; gitops-engine/pkg/sync/hook/hook.go
// HookFinalizer; gitops-engine/pkg/health/health.go HealthStatus* codes).
const (
	incorrectReturnType = "expect %s output from Lua script, not %s"
	invalidHealthStatus = "Lua returned an invalid health status"
	hookFinalizer       = "argocd.argoproj.io/hook-finalizer"
)

// argocdHealth is gitops-engine's health.GetResourceHealth with an argocd-cm
// health override: what Argo CD shows as the object's health.
func argocdHealth(obj *unstructured.Unstructured, script string) healthStatus {
	if obj.GetDeletionTimestamp() != nil && !slices.Contains(obj.GetFinalizers(), hookFinalizer) {
		return healthStatus{Status: "Progressing", Message: "Pending deletion"}
	}
	h, err := executeHealthLua(obj, script, false)
	if err != nil {
		return healthStatus{Status: "Unknown", Message: err.Error()}
	}
	return h
}

// executeHealthLua is util/lua/lua.go VM.ExecuteHealthLua.
func executeHealthLua(obj *unstructured.Unstructured, script string, useOpenLibs bool) (healthStatus, error) {
	l, err := runLua(obj, script, useOpenLibs)
	if err != nil {
		return healthStatus{}, err
	}
	returnValue := l.Get(-1)
	switch returnValue.Type() {
	case lua.LTTable:
		jsonBytes, err := luaToJSON(returnValue)
		if err != nil {
			return healthStatus{}, err
		}
		var hs healthStatus
		if err := json.Unmarshal(jsonBytes, &hs); err != nil {
			// Argo CD: "Validate if the error is caused by an empty object"
			// (an empty table encodes as []); errors.As matches any
			// *json.UnmarshalTypeError there.
			var typeError *json.UnmarshalTypeError
			if errors.As(err, &typeError) {
				return healthStatus{}, nil
			}
			return healthStatus{}, err
		}
		if !isValidHealthStatusCode(hs.Status) {
			return healthStatus{Status: "Unknown", Message: invalidHealthStatus}, nil
		}
		return hs, nil
	case lua.LTNil:
		return healthStatus{}, nil
	}
	return healthStatus{}, fmt.Errorf(incorrectReturnType, "table", returnValue.Type().String())
}

// isValidHealthStatusCode is util/lua/lua.go isValidHealthStatusCode.
func isValidHealthStatusCode(code string) bool {
	switch code {
	case "Unknown", "Progressing", "Suspended", "Healthy", "Degraded", "Missing":
		return true
	}
	return false
}

// runLua is util/lua/lua.go VM.runLuaWithResourceActionParameters with no
// action parameters (VM.runLua), minus the compiled-script cache
// (loadCompiledFunction: a cache hit runs the same proto LoadString makes).
// As there, the state is closed before the caller reads the returned value
// (Close frees the call frames, not the value stack).
func runLua(obj *unstructured.Unstructured, script string, useOpenLibs bool) (*lua.LState, error) {
	l := lua.NewState(lua.Options{
		SkipOpenLibs: !useOpenLibs,
	})
	defer l.Close()
	// Argo CD opens these whatever UseOpenLibs says (and panics on error).
	for _, pair := range []struct {
		n string
		f lua.LGFunction
	}{
		{lua.LoadLibName, lua.OpenPackage},
		{lua.BaseLibName, lua.OpenBase},
		{lua.TabLibName, lua.OpenTable},
		// load our 'safe' version of the OS library
		{lua.OsLibName, openSafeOs},
	} {
		if err := l.CallByParam(lua.P{
			Fn:      l.NewFunction(pair.f),
			NRet:    0,
			Protect: true,
		}, lua.LString(pair.n)); err != nil {
			return nil, fmt.Errorf("open Lua library %q: %w", pair.n, err)
		}
	}
	// preload our 'safe' version of the OS library. Allows the 'local os = require("os")' to work
	l.PreloadModule(lua.OsLibName, safeOsLoader)

	ctx, cancel := context.WithTimeout(context.Background(), 1*time.Second)
	defer cancel()
	l.SetContext(ctx)

	l.SetGlobal("actionParams", l.CreateTable(0, 0))
	l.SetGlobal("obj", decodeValue(l, obj.Object))

	fn, err := l.LoadString(script)
	if err == nil {
		l.Push(fn)
		err = l.PCall(0, lua.MultRet, nil)
	}
	// Remove the default lua stack trace from execution errors since these
	// errors will make it back to the user
	var apiErr *lua.ApiError
	if errors.As(err, &apiErr) && apiErr.Type == lua.ApiErrorRun {
		apiErr.StackTrace = ""
		err = apiErr
	}
	return l, err
}

// openSafeOs is util/lua/oslib_safe.go OpenSafeOs, verbatim: it registers
// the module under lua.TabLibName, not lua.OsLibName, and since the table
// library is already loaded RegisterModule returns it unchanged. So, as in
// Argo CD, a script run without open libraries has no global `os`; only
// `require("os")` (safeOsLoader) gives os.time and os.date. osFuncs and the
// rest of oslib_safe.go are copied in argocd_oslib.go.
func openSafeOs(l *lua.LState) int {
	tabmod := l.RegisterModule(lua.TabLibName, osFuncs)
	l.Push(tabmod)
	return 1
}

// safeOsLoader is util/lua/oslib_safe.go SafeOsLoader.
func safeOsLoader(l *lua.LState) int {
	mod := l.SetFuncs(l.NewTable(), osFuncs)
	l.Push(mod)
	return 1
}

// decodeValue is util/lua/lua.go decodeValue: JSON-like Go values (with the
// int64 numbers of a client-go object) to Lua values.
func decodeValue(l *lua.LState, value any) lua.LValue {
	switch converted := value.(type) {
	case bool:
		return lua.LBool(converted)
	case float64:
		return lua.LNumber(converted)
	case string:
		return lua.LString(converted)
	case json.Number:
		return lua.LString(converted)
	case int:
		return lua.LNumber(converted)
	case int32:
		return lua.LNumber(converted)
	case int64:
		return lua.LNumber(converted)
	case []any:
		arr := l.CreateTable(len(converted), 0)
		for _, item := range converted {
			arr.Append(decodeValue(l, item))
		}
		return arr
	case map[string]any:
		tbl := l.CreateTable(0, len(converted))
		for key, item := range converted {
			tbl.RawSetH(lua.LString(key), decodeValue(l, item))
		}
		return tbl
	case nil:
		return lua.LNil
	}
	return lua.LNil
}

// luaToJSON is layeh.com/gopher-json's Encode (v0.0.0-20190114024228-97fed8db8427,
// the version Argo CD pins; public domain): an empty table is [], a table
// with keys 1..n an array, one with string keys an object.
func luaToJSON(value lua.LValue) ([]byte, error) {
	return json.Marshal(jsonValue{LValue: value, visited: map[*lua.LTable]bool{}})
}

var (
	errNested      = errors.New("cannot encode recursively nested tables to JSON")
	errSparseArray = errors.New("cannot encode sparse array")
	errInvalidKeys = errors.New("cannot encode mixed or invalid key types")
)

type invalidTypeError lua.LValueType

func (i invalidTypeError) Error() string {
	return `cannot encode ` + lua.LValueType(i).String() + ` to JSON`
}

type jsonValue struct {
	lua.LValue
	visited map[*lua.LTable]bool
}

func (j jsonValue) MarshalJSON() (data []byte, err error) {
	switch converted := j.LValue.(type) {
	case lua.LBool:
		data, err = json.Marshal(bool(converted))
	case lua.LNumber:
		data, err = json.Marshal(float64(converted))
	case *lua.LNilType:
		data = []byte(`null`)
	case lua.LString:
		data, err = json.Marshal(string(converted))
	case *lua.LTable:
		if j.visited[converted] {
			return nil, errNested
		}
		j.visited[converted] = true

		key, value := converted.Next(lua.LNil)

		switch key.Type() {
		case lua.LTNil: // empty table
			data = []byte(`[]`)
		case lua.LTNumber:
			arr := make([]jsonValue, 0, converted.Len())
			expectedKey := lua.LNumber(1)
			for key != lua.LNil {
				if key.Type() != lua.LTNumber {
					err = errInvalidKeys
					return
				}
				if expectedKey != key {
					err = errSparseArray
					return
				}
				arr = append(arr, jsonValue{value, j.visited})
				expectedKey++
				key, value = converted.Next(key)
			}
			data, err = json.Marshal(arr)
		case lua.LTString:
			obj := make(map[string]jsonValue)
			for key != lua.LNil {
				if key.Type() != lua.LTString {
					err = errInvalidKeys
					return
				}
				obj[key.String()] = jsonValue{value, j.visited}
				key, value = converted.Next(key)
			}
			data, err = json.Marshal(obj)
		default:
			err = errInvalidKeys
		}
	default:
		err = invalidTypeError(j.LValue.Type())
	}
	return
}
