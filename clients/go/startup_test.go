package memoryd_test

import (
	"context"
	"testing"
	"time"

	memoryd "github.com/memoryd/memoryd/clients/go"
	pb "github.com/memoryd/memoryd/clients/go/memorydv1"
)

// While memoryd loads it answers UNAVAILABLE: a call that may not be retried fails with
// it, an idempotent one rides it out.
func TestRetriesOutlastADaemonThatIsStarting(t *testing.T) {
	const token = "startup-token-for-the-tests"
	address := startDaemon(t, token, true)
	ctx := context.Background()

	impatient, err := memoryd.New(memoryd.Config{Address: address, Token: token, Retries: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer impatient.Close()
	_, err = impatient.Store(ctx, &pb.StoreRequest{AgentId: "boot", Text: "written during start-up"})
	if memoryd.CodeName(err) != "UNAVAILABLE" {
		t.Fatalf("a Store while the daemon loads: want UNAVAILABLE, got %v", err)
	}

	patient, err := memoryd.New(memoryd.Config{Address: address, Token: token, Retries: 1000,
		MaxBackoff: 500 * time.Millisecond, Timeout: 120 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer patient.Close()
	stats, err := patient.Stats(ctx, "boot")
	if err != nil {
		t.Fatalf("Stats with retries: %v", err)
	}
	if stats.Total != 0 {
		t.Fatalf("the Store during start-up wrote %d memories", stats.Total)
	}
}

// With nothing listening at all, the deadline bounds the retries and the error says why.
func TestDeadlineBoundsRetries(t *testing.T) {
	c, err := memoryd.New(memoryd.Config{Address: "127.0.0.1:1", Timeout: 700 * time.Millisecond, Retries: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	_, err = c.Stats(context.Background(), "main")
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("the call took %v, past its 700ms deadline", took)
	}
	if name := memoryd.CodeName(err); name != "UNAVAILABLE" && name != "DEADLINE_EXCEEDED" {
		t.Fatalf("want UNAVAILABLE or DEADLINE_EXCEEDED, got %v", err)
	}
}
