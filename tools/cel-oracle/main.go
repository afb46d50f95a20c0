// Command cel-oracle evaluates DRA device selectors with Kubernetes' own CEL
// environment (k8s.io/dynamic-resource-allocation/cel), so that the Python
// evaluator in modelplane_common.cel can be compared with the real thing.
//
// Input, one JSON object per line on stdin:
//
//	{"expression": "...", "device": {"driver": "d", "attributes": {"name": {"int": 1}},
//	 "capacity": {"name": "80Gi"}}}
//
// An attribute holds exactly one of "int", "bool", "string", "version".
// Output, one JSON line per input line, in order:
//
//	{"outcome": "true"|"false"|"compile"|"cost"|"runtime"|"input", "message": "..."}
//
// "compile": the API server's validation rejects the expression (syntax,
// undeclared names, type check, result not bool). "cost": it compiles but its
// estimated worst-case cost exceeds CELSelectorExpressionMaxCost (validation
// rejects it as "too complex"), or evaluation hit the runtime cost limit.
// "runtime": evaluation on this device failed (a missing key, a type error, a
// bad quantity() literal...), which fails allocation on that node. "input":
// the case itself is malformed (a bug in the caller, never a CEL outcome).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apiserver/pkg/cel/environment"
	dracel "k8s.io/dynamic-resource-allocation/cel"
)

type attribute struct {
	Int     *int64  `json:"int,omitempty"`
	Bool    *bool   `json:"bool,omitempty"`
	String  *string `json:"string,omitempty"`
	Version *string `json:"version,omitempty"`
}

type device struct {
	Driver     string               `json:"driver"`
	Attributes map[string]attribute `json:"attributes"`
	Capacity   map[string]string    `json:"capacity"`
}

type testCase struct {
	Expression string `json:"expression"`
	Device     device `json:"device"`
}

type verdict struct {
	Outcome string `json:"outcome"`
	Message string `json:"message,omitempty"`
}

// toDevice builds the allocator's view of a device, as a ResourceSlice would carry it.
func toDevice(in device) (dracel.Device, error) {
	out := dracel.Device{
		Driver:     in.Driver,
		Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{},
		Capacity:   map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{},
	}
	for name, a := range in.Attributes {
		out.Attributes[resourceapi.QualifiedName(name)] = resourceapi.DeviceAttribute{
			IntValue: a.Int, BoolValue: a.Bool, StringValue: a.String, VersionValue: a.Version,
		}
	}
	for name, text := range in.Capacity {
		value, err := resource.ParseQuantity(text)
		if err != nil {
			return out, fmt.Errorf("capacity %s: %w", name, err)
		}
		out.Capacity[resourceapi.QualifiedName(name)] = resourceapi.DeviceCapacity{Value: value}
	}
	return out, nil
}

// judge compiles the expression as the API server validates a new claim's
// selector, then evaluates it on the device as the allocator does.
func judge(c testCase) verdict {
	dev, err := toDevice(c.Device)
	if err != nil {
		return verdict{Outcome: "input", Message: err.Error()}
	}
	if len(c.Expression) > resourceapi.CELSelectorExpressionMaxLength {
		return verdict{Outcome: "compile", Message: "too long"}
	}
	envType := environment.NewExpressions
	compiled := dracel.GetCompiler(dracel.Features{}).CompileCELExpression(c.Expression, dracel.Options{EnvType: &envType})
	if compiled.Error != nil {
		return verdict{Outcome: "compile", Message: compiled.Error.Detail}
	}
	if compiled.MaxCost > resourceapi.CELSelectorExpressionMaxCost {
		return verdict{Outcome: "cost", Message: fmt.Sprintf("estimated cost %d exceeds the limit", compiled.MaxCost)}
	}
	matches, _, err := compiled.DeviceMatches(context.Background(), dev)
	if err != nil {
		if strings.Contains(err.Error(), "cost limit exceeded") {
			return verdict{Outcome: "cost", Message: err.Error()}
		}
		return verdict{Outcome: "runtime", Message: err.Error()}
	}
	return verdict{Outcome: fmt.Sprint(matches)}
}

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<24)
	out := bufio.NewWriter(os.Stdout)
	encoder := json.NewEncoder(out)
	for in.Scan() {
		var c testCase
		v := verdict{Outcome: "input"}
		if err := json.Unmarshal(in.Bytes(), &c); err != nil {
			v.Message = err.Error()
		} else {
			v = judge(c)
		}
		if err := encoder.Encode(v); err != nil {
			fmt.Fprintln(os.Stderr, "cel-oracle:", err)
			os.Exit(1)
		}
		// One answer per question: the caller may wait for each line.
		if err := out.Flush(); err != nil {
			fmt.Fprintln(os.Stderr, "cel-oracle:", err)
			os.Exit(1)
		}
	}
	if err := in.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "cel-oracle:", err)
		os.Exit(1)
	}
}
