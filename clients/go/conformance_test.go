package memoryd_test

// The conformance scenarios (../../tests/conformance/scenarios.json) through this client,
// against a real daemon started with auth on. The interpreter of the scenario language is
// the Go copy of tests/conformance/README.md's rules.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	memoryd "github.com/memoryd/memoryd/clients/go"
	pb "github.com/memoryd/memoryd/clients/go/memorydv1"
)

type step struct {
	RPC             string            `json:"rpc"`
	Client          string            `json:"client"`
	Request         json.RawMessage   `json:"request"`
	Requests        []json.RawMessage `json:"requests"`
	Code            string            `json:"code"`
	MessageContains string            `json:"message_contains"`
	Checks          []map[string]any  `json:"checks"`
	Save            map[string]string `json:"save"`
}

type scenario struct {
	Name  string `json:"name"`
	Steps []step `json:"steps"`
}

type scenarioFile struct {
	AuthToken string     `json:"auth_token"`
	Scenarios []scenario `json:"scenarios"`
}

func fromEnv(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}

func loadScenarios(t *testing.T) scenarioFile {
	t.Helper()
	path := fromEnv("MEMORYD_CONFORMANCE_SCENARIOS", "../../tests/conformance/scenarios.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading the scenarios (set MEMORYD_CONFORMANCE_SCENARIOS?): %v", err)
	}
	var doc scenarioFile
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("parsing %s: %v", path, err)
	}
	return doc
}

func TestEveryRPCHasAScenario(t *testing.T) {
	doc := loadScenarios(t)
	covered := map[string]bool{}
	for _, s := range doc.Scenarios {
		for _, st := range s.Steps {
			covered[st.RPC] = true
		}
	}
	var rpcs []string
	for _, fd := range []protoFile{pb.File_memoryd_v1_memory_proto, pb.File_memoryd_v1_hooks_proto} {
		services := fd.Services()
		for i := 0; i < services.Len(); i++ {
			svc := services.Get(i)
			for j := 0; j < svc.Methods().Len(); j++ {
				rpcs = append(rpcs, fmt.Sprintf("%s.%s", svc.Name(), svc.Methods().Get(j).Name()))
			}
		}
	}
	if len(rpcs) == 0 {
		t.Fatal("no RPCs found in the descriptors")
	}
	for _, rpc := range rpcs {
		if !covered[rpc] {
			t.Errorf("RPC %s has no conformance scenario", rpc)
		}
		delete(covered, rpc)
	}
	for rpc := range covered {
		t.Errorf("scenarios name %s, which the proto lacks", rpc)
	}
}

// startDaemon runs `python -m memoryd serve` with auth on; returns host:port once it
// serves (or, with untilListening, as soon as its port is bound while it still loads).
// extraEnv adds NAME=value settings (e.g. TLS) to the daemon's environment.
func startDaemon(t *testing.T, token string, untilListening bool, extraEnv ...string) string {
	t.Helper()
	python, err := filepath.Abs(fromEnv("MEMORYD_PYTHON", "../../.venv/bin/python"))
	if err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	cmd := exec.Command(python, "-m", "memoryd", "serve", "--listen", "127.0.0.1:0", "--data-dir", data)
	cmd.Dir = "../.."
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MEMORYD_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "MEMORYD_AUTH_TOKEN="+token)
	cmd.Env = append(cmd.Env, extraEnv...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &logBuffer{listening: make(chan string, 1)}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s (set MEMORYD_PYTHON?): %v", python, err)
	}
	lines := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		lines <- line
		_, _ = io.Copy(io.Discard, stdout)
	}()
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("memoryd exited with %v\n%s", err, tail(stderr.String()))
			}
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			t.Errorf("memoryd did not stop within 30s of SIGTERM")
		}
	}
	if untilListening {
		select {
		case port := <-stderr.listening:
			t.Cleanup(stop)
			return "127.0.0.1:" + port
		case <-time.After(180 * time.Second):
			_ = cmd.Process.Kill()
			t.Fatalf("memoryd did not listen within 180s\n%s", tail(stderr.String()))
		}
	}
	select {
	case line := <-lines:
		const prefix = "memoryd serving on "
		if !strings.HasPrefix(line, prefix) {
			_ = cmd.Process.Kill()
			t.Fatalf("memoryd did not serve (%q)\n%s", line, tail(stderr.String()))
		}
		t.Cleanup(stop)
		return strings.TrimSpace(strings.TrimPrefix(line, prefix))
	case <-time.After(180 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("memoryd did not serve within 180s\n%s", tail(stderr.String()))
	}
	return ""
}

// logBuffer keeps the daemon's log and reports the port of its "listening on" line.
type logBuffer struct {
	mu        sync.Mutex
	text      strings.Builder
	listening chan string
	seen      bool
}

var listeningRE = regexp.MustCompile(`listening on \S+ \(port (\d+)\)`)

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.text.Write(p)
	if !b.seen {
		if m := listeningRE.FindStringSubmatch(b.text.String()); m != nil {
			b.seen = true
			b.listening <- m[1]
		}
	}
	return len(p), nil
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.text.String()
}

func tail(s string) string {
	if len(s) > 3000 {
		return s[len(s)-3000:]
	}
	return s
}

func TestConformance(t *testing.T) {
	doc := loadScenarios(t)
	address := startDaemon(t, doc.AuthToken, false)
	clients := map[string]*memoryd.Client{}
	for name, token := range map[string]string{"default": doc.AuthToken, "no_token": "", "wrong_token": "wrong-token"} {
		c, err := memoryd.New(memoryd.Config{Address: address, Token: token, Timeout: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		clients[name] = c
	}
	for _, s := range doc.Scenarios {
		t.Run(s.Name, func(t *testing.T) { runScenario(t, clients, s) })
	}
}

func runScenario(t *testing.T, clients map[string]*memoryd.Client, s scenario) {
	vars := map[string]any{}
	for n, st := range s.Steps {
		where := fmt.Sprintf("step %d (%s)", n, st.RPC)
		who := st.Client
		if who == "" {
			who = "default"
		}
		c := clients[who]
		var result any
		var err error
		if st.Requests != nil {
			var reqs []json.RawMessage
			for _, r := range st.Requests {
				reqs = append(reqs, json.RawMessage(substitute(t, string(r), vars)))
			}
			result, err = streaming(c, st.RPC, reqs)
		} else {
			result, err = unary(c, st.RPC, []byte(substitute(t, string(st.Request), vars)))
		}
		want := st.Code
		if want == "" {
			want = "OK"
		}
		if got := memoryd.CodeName(err); got != want {
			t.Fatalf("%s: expected %s, got %s (%v)", where, want, got, err)
		}
		if st.MessageContains != "" {
			var e *memoryd.Error
			if !asError(err, &e) || !strings.Contains(strings.ToLower(e.Message), strings.ToLower(st.MessageContains)) {
				t.Fatalf("%s: message %v lacks %q", where, err, st.MessageContains)
			}
		}
		for _, chk := range st.Checks {
			spec := substituteAny(t, chk, vars).(map[string]any)
			if problem := check(result, spec); problem != "" {
				dump, _ := json.Marshal(result)
				t.Fatalf("%s: %s\n%s", where, problem, dump)
			}
		}
		for name, path := range st.Save {
			v := resolve(result, path)
			if v == nil || v == "" {
				t.Fatalf("%s: nothing at %s to save as %s", where, path, name)
			}
			vars[name] = v
		}
	}
}

func asError(err error, target **memoryd.Error) bool {
	e, ok := err.(*memoryd.Error)
	if ok {
		*target = e
	}
	return ok
}

func parse[M proto.Message](raw []byte, m M) M {
	if err := protojson.Unmarshal(raw, m); err != nil {
		panic(fmt.Sprintf("bad request JSON %s: %v", raw, err))
	}
	return m
}

func toJSON(m proto.Message) any {
	raw, err := protojson.MarshalOptions{EmitUnpopulated: true}.Marshal(m)
	if err != nil {
		panic(err)
	}
	var out any
	if err := json.Unmarshal(raw, &out); err != nil {
		panic(err)
	}
	return out
}

func unary(c *memoryd.Client, rpc string, raw []byte) (any, error) {
	ctx := context.Background()
	var resp proto.Message
	var err error
	switch rpc {
	case "MemoryService.Store":
		resp, err = c.Store(ctx, parse(raw, &pb.StoreRequest{}))
	case "MemoryService.Recall":
		resp, err = c.Recall(ctx, parse(raw, &pb.RecallRequest{}))
	case "MemoryService.Forget":
		resp, err = c.Forget(ctx, parse(raw, &pb.ForgetRequest{}))
	case "MemoryService.Update":
		resp, err = c.Update(ctx, parse(raw, &pb.UpdateRequest{}))
	case "MemoryService.Get":
		r := parse(raw, &pb.GetRequest{})
		var m *pb.Memory
		m, err = c.Get(ctx, r.AgentId, r.Id)
		resp = &pb.GetResponse{Memory: m}
	case "MemoryService.List":
		resp, err = c.List(ctx, parse(raw, &pb.ListRequest{}))
	case "MemoryService.Stats":
		resp, err = c.Stats(ctx, parse(raw, &pb.StatsRequest{}).AgentId)
	case "MemoryService.ListConflicts":
		resp, err = c.ListConflicts(ctx, parse(raw, &pb.ListConflictsRequest{}))
	case "MemoryService.Export":
		var memories []any
		for m, e := range c.Export(ctx, parse(raw, &pb.ExportRequest{})) {
			if e != nil {
				return nil, e
			}
			memories = append(memories, toJSON(m))
		}
		return map[string]any{"memories": orEmpty(memories)}, nil
	case "HookService.BuildContext":
		resp, err = c.BuildContext(ctx, parse(raw, &pb.BuildContextRequest{}))
	case "HookService.Capture":
		resp, err = c.Capture(ctx, parse(raw, &pb.CaptureRequest{}))
	default:
		panic("the Go runner does not know " + rpc)
	}
	if err != nil {
		return nil, err
	}
	return toJSON(resp), nil
}

func orEmpty(v []any) []any {
	if v == nil {
		return []any{}
	}
	return v
}

func streaming(c *memoryd.Client, rpc string, raws []json.RawMessage) (any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	switch rpc {
	case "MemoryService.Import":
		var agent string
		var memories []*pb.Memory
		for _, raw := range raws {
			r := parse(raw, &pb.ImportRequest{})
			agent = r.AgentId
			memories = append(memories, r.Memory)
		}
		resp, err := c.Import(ctx, agent, slices.Values(memories))
		if err != nil {
			return nil, err
		}
		return toJSON(resp), nil
	case "MemoryService.Stream":
		session, err := c.Stream(ctx)
		if err != nil {
			return nil, err
		}
		defer session.Close()
		for _, raw := range raws {
			if err := session.Send(parse(raw, &pb.StreamRequest{})); err != nil {
				break // Recv reports why
			}
		}
		if err := session.CloseSend(); err != nil {
			return nil, err
		}
		responses := map[string]any{}
		for {
			resp, err := session.Recv()
			if err == io.EOF {
				return map[string]any{"responses": responses}, nil
			}
			if err != nil {
				return nil, err
			}
			responses[resp.RequestId] = toJSON(resp)
		}
	}
	panic("the Go runner does not know " + rpc)
}

var varRE = regexp.MustCompile(`\$\{([A-Za-z0-9_]+)\}`)

func substitute(t *testing.T, s string, vars map[string]any) string {
	return varRE.ReplaceAllStringFunc(s, func(m string) string {
		v, ok := vars[m[2:len(m)-1]]
		if !ok {
			t.Fatalf("%s was never saved", m)
		}
		return fmt.Sprint(v)
	})
}

func substituteAny(t *testing.T, v any, vars map[string]any) any {
	switch x := v.(type) {
	case string:
		return substitute(t, x, vars)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = substituteAny(t, e, vars)
		}
		return out
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			out[k] = substituteAny(t, e, vars)
		}
		return out
	}
	return v
}

var segmentRE = regexp.MustCompile(`^([^\[\]]*)((?:\[(?:\d+|\*)\])*)$`)
var indexRE = regexp.MustCompile(`\[(\d+|\*)\]`)

// resolve: the value at path, nil when absent, a list when the path has [*].
func resolve(doc any, path string) any {
	values := []any{doc}
	wild := false
	for _, part := range strings.Split(path, ".") {
		m := segmentRE.FindStringSubmatch(part)
		if m == nil {
			panic("bad path " + path)
		}
		var next []any
		for _, v := range values {
			if m[1] != "" {
				obj, _ := v.(map[string]any)
				v = obj[m[1]]
			}
			next = append(next, v)
		}
		for _, idx := range indexRE.FindAllStringSubmatch(m[2], -1) {
			var expanded []any
			for _, v := range next {
				list, ok := v.([]any)
				switch {
				case !ok:
					expanded = append(expanded, nil)
				case idx[1] == "*":
					wild = true
					expanded = append(expanded, list...)
				default:
					i, _ := strconv.Atoi(idx[1])
					if i < len(list) {
						expanded = append(expanded, list[i])
					} else {
						expanded = append(expanded, nil)
					}
				}
			}
			next = expanded
		}
		values = next
	}
	if wild {
		out := []any{}
		for _, v := range values {
			if v != nil {
				out = append(out, v)
			}
		}
		return out
	}
	return values[0]
}

func toFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case nil:
		return 0, true
	case float64:
		return x, true
	case string:
		f, err := strconv.ParseFloat(x, 64)
		return f, err == nil
	}
	return 0, false
}

func same(actual, expected any) bool {
	switch e := expected.(type) {
	case nil:
		return actual == nil
	case bool:
		a, _ := actual.(bool)
		return a == e
	case float64:
		a, ok := toFloat(actual)
		return ok && math.Abs(a-e) <= 1e-6+1e-5*math.Abs(e)
	case string:
		if actual == nil {
			return e == ""
		}
		a, ok := actual.(string)
		return ok && a == e
	case []any:
		if actual == nil {
			actual = []any{}
		}
		a, ok := actual.([]any)
		if !ok || len(a) != len(e) {
			return false
		}
		for i := range e {
			if !same(a[i], e[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		if actual == nil {
			actual = map[string]any{}
		}
		a, ok := actual.(map[string]any)
		if !ok || len(a) != len(e) {
			return false
		}
		for k, v := range e {
			if !same(a[k], v) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(actual, expected)
}

func contains(actual, expected any) bool {
	switch a := actual.(type) {
	case string:
		e, ok := expected.(string)
		return ok && strings.Contains(a, e)
	case []any:
		for _, v := range a {
			if same(v, expected) {
				return true
			}
		}
	}
	return false
}

func length(v any) int {
	switch x := v.(type) {
	case []any:
		return len(x)
	case map[string]any:
		return len(x)
	case string:
		return len(x)
	}
	return 0
}

// check returns "" when spec holds on result, else what is wrong.
func check(result any, spec map[string]any) string {
	path, _ := spec["path"].(string)
	actual := resolve(result, path)
	for op, want := range spec {
		var ok bool
		switch op {
		case "path":
			continue
		case "eq":
			ok = same(actual, want)
		case "ne":
			ok = !same(actual, want)
		case "len":
			ok = float64(length(actual)) == want.(float64)
		case "contains":
			ok = contains(actual, want)
		case "excludes":
			ok = !contains(actual, want)
		case "gte", "lte":
			a, _ := toFloat(actual)
			ok = (op == "gte" && a >= want.(float64)) || (op == "lte" && a <= want.(float64))
		default:
			return "unknown check operator " + op
		}
		if !ok {
			w, _ := json.Marshal(want)
			a, _ := json.Marshal(actual)
			return fmt.Sprintf("%s %s %s failed: got %s", path, op, w, a)
		}
	}
	return ""
}

type protoFile = interface {
	Services() protoreflect.ServiceDescriptors
}
