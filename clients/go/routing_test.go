package memoryd_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"regexp"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	memoryd "github.com/memoryd/memoryd/clients/go"
	pb "github.com/memoryd/memoryd/clients/go/memorydv1"
)

type routingVectors struct {
	Weights []struct {
		Address string `json:"address"`
		AgentID string `json:"agent_id"`
		Weight  string `json:"weight"`
	} `json:"weights"`
	Orders []struct {
		Addresses []string `json:"addresses"`
		AgentID   string   `json:"agent_id"`
		Order     []string `json:"order"`
	} `json:"orders"`
}

// The rule every memoryd client shares (tests/data/routing_vectors.json).
func TestRoutingVectors(t *testing.T) {
	raw, err := os.ReadFile("../../tests/data/routing_vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var v routingVectors
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Weights) < 5 || len(v.Orders) < 20 {
		t.Fatalf("too few vectors: %d weights, %d orders", len(v.Weights), len(v.Orders))
	}
	for _, w := range v.Weights {
		got := memoryd.Weight(w.Address, w.AgentID)
		if hex.EncodeToString(got[:]) != w.Weight {
			t.Errorf("weight(%q, %q) = %x, want %s", w.Address, w.AgentID, got, w.Weight)
		}
	}
	for _, o := range v.Orders {
		var got []string
		for _, i := range memoryd.RendezvousOrder(o.Addresses, o.AgentID) {
			got = append(got, o.Addresses[i])
		}
		if fmt.Sprint(got) != fmt.Sprint(o.Order) {
			t.Errorf("order of %q over %v = %v, want %v", o.AgentID, o.Addresses, got, o.Order)
		}
	}
}

// The README's example: agent "main" over 10.0.0.1 and 10.0.0.2 goes to 10.0.0.2 first
// (New does not connect).
func TestDaemonsForTheReadmeExample(t *testing.T) {
	c, err := memoryd.New(memoryd.Config{Addresses: []string{"10.0.0.1:50051", "10.0.0.2:50051"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := c.DaemonsFor("main"); fmt.Sprint(got) != "[10.0.0.2:50051 10.0.0.1:50051]" {
		t.Fatalf("DaemonsFor(main) = %v", got)
	}
	if _, err := memoryd.New(memoryd.Config{Addresses: []string{"10.0.0.1:50051", "http://10.0.0.1:50051/"}}); memoryd.CodeName(err) != "INVALID_ARGUMENT" {
		t.Fatalf("one daemon named twice: want INVALID_ARGUMENT, got %v", err)
	}
}

// fake answers every Store, Get and Update with one status and records the requests.
type fake struct {
	pb.UnimplementedMemoryServiceServer
	code    codes.Code
	mu      sync.Mutex
	calls   []string
	lastKey string
}

func (f *fake) record(name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, name)
	return status.Errorf(f.code, "the fake daemon answers %s", f.code)
}

func (f *fake) Store(_ context.Context, r *pb.StoreRequest) (*pb.StoreResponse, error) {
	f.mu.Lock()
	f.lastKey = r.GetIdempotencyKey()
	f.mu.Unlock()
	return nil, f.record("Store")
}

func (f *fake) Get(context.Context, *pb.GetRequest) (*pb.GetResponse, error) {
	return nil, f.record("Get")
}

func (f *fake) Update(context.Context, *pb.UpdateRequest) (*pb.UpdateResponse, error) {
	return nil, f.record("Update")
}

func startFake(t *testing.T, code codes.Code) (*fake, string) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fake{code: code}
	s := grpc.NewServer()
	pb.RegisterMemoryServiceServer(s, f)
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	return f, lis.Addr().String()
}

func closedPort(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	address := lis.Addr().String()
	_ = lis.Close()
	return address
}

func agentPreferring(addresses []string, first string) string {
	for n := 0; ; n++ {
		agent := fmt.Sprintf("fleet-go-%d-%d", time.Now().UnixNano(), n)
		if addresses[memoryd.RendezvousOrder(addresses, agent)[0]] == first {
			return agent
		}
	}
}

// Over a fleet: failover with the key of the first try (which the next daemon replays),
// no failover on NOT_FOUND, an Update never sent twice, and a refused connection moving
// every call on.
func TestFleetFailover(t *testing.T) {
	const token = "fleet-token-for-the-tests"
	real := startDaemon(t, token, false)
	ctx := context.Background()
	direct, err := memoryd.New(memoryd.Config{Address: real, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()

	down, downAddress := startFake(t, codes.Unavailable)
	fleet := []string{downAddress, real}
	agent := agentPreferring(fleet, downAddress)
	c, err := memoryd.New(memoryd.Config{Addresses: fleet, Token: token, DownFor: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := c.DaemonsFor(agent); got[0] != downAddress {
		t.Fatalf("DaemonsFor(%q) = %v, want %s first", agent, got, downAddress)
	}
	stored, err := c.Store(ctx, &pb.StoreRequest{AgentId: agent, Text: "The standup is at 9:30"})
	if err != nil {
		t.Fatalf("Store over the fleet: %v", err)
	}
	if !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`).MatchString(down.lastKey) {
		t.Fatalf("the first try carried key %q, want a UUID", down.lastKey)
	}
	replay, err := direct.Store(ctx, &pb.StoreRequest{AgentId: agent, Text: "The standup is at 9:30", IdempotencyKey: down.lastKey})
	if err != nil || replay.GetMemory().GetId() != stored.GetMemory().GetId() || replay.GetOutcome() != pb.StoreOutcome_STORE_OUTCOME_CREATED {
		t.Fatalf("the next daemon does not replay the key: %v %v", replay, err)
	}
	_, err = c.Update(ctx, &pb.UpdateRequest{AgentId: agent, Id: stored.GetMemory().GetId(), Text: ptr("The standup is at 10:00")})
	if memoryd.CodeName(err) != "UNAVAILABLE" {
		t.Fatalf("an Update answered UNAVAILABLE: want it returned, got %v", err)
	}
	if fmt.Sprint(down.calls) != "[Store Update]" {
		t.Fatalf("the fake daemon saw %v", down.calls)
	}

	notFound, nfAddress := startFake(t, codes.NotFound)
	fleet = []string{nfAddress, real}
	agent = agentPreferring(fleet, nfAddress)
	m, err := direct.Store(ctx, &pb.StoreRequest{AgentId: agent, Text: "Lunch is at noon"})
	if err != nil {
		t.Fatal(err)
	}
	c2, err := memoryd.New(memoryd.Config{Addresses: fleet, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if _, err := c2.Get(ctx, agent, m.GetMemory().GetId()); memoryd.CodeName(err) != "NOT_FOUND" {
		t.Fatalf("NOT_FOUND must be the answer, got %v", err)
	}
	if fmt.Sprint(notFound.calls) != "[Get]" {
		t.Fatalf("the fake daemon saw %v", notFound.calls)
	}

	refused := closedPort(t)
	fleet = []string{refused, real}
	agent = agentPreferring(fleet, refused)
	c3, err := memoryd.New(memoryd.Config{Addresses: fleet, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	m, err = c3.Store(ctx, &pb.StoreRequest{AgentId: agent, Text: "The wifi password is on the fridge"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c3.Update(ctx, &pb.UpdateRequest{AgentId: agent, Id: m.GetMemory().GetId(), Text: ptr("The wifi password is in the drawer")}); err != nil {
		t.Fatalf("an Update past a refused connection: %v", err)
	}
	got, err := direct.Get(ctx, agent, m.GetMemory().GetId())
	if err != nil || got.GetText() != "The wifi password is in the drawer" {
		t.Fatalf("the next daemon holds %v (%v)", got, err)
	}
}

func ptr(s string) *string { return &s }
