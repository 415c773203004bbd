package memoryd

// Routing over a fleet of daemons (Config.Addresses): which daemon serves an agent, and
// when to try another.
//
// Agent affinity is rendezvous (highest random weight) hashing, the same rule in every
// memoryd client (Python, TypeScript, Go, Rust, Java; checked against
// tests/data/routing_vectors.json), so a host mixing languages sends one agent to one
// daemon and that daemon's caches stay warm:
//
//   - an address is taken as given, without a leading "http://" or "https://" and a
//     trailing "/";
//   - its weight for an agent is the first 8 bytes of
//     SHA-256(address UTF-8 || 0x00 || agentID UTF-8), a big-endian unsigned 64-bit integer;
//   - the agent's order is every address by weight, highest first (ties: the smaller
//     address first, by bytes).
//
// What fails over: a daemon that cannot be reached (refused, no connection within
// ConnectTimeout: nothing was sent, any call moves on); UNAVAILABLE answered to an
// idempotent call (reads, and Store and Capture, which over a fleet always carry an
// idempotency key, made by the client when there is none). Update, Forget and every other
// error (INVALID_ARGUMENT, NOT_FOUND, PERMISSION_DENIED, ...) are returned as they are. A
// daemon that failed is skipped for DownFor, then tried again.

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// NormalAddress is the address as hashed: without an http:// or https:// prefix or a
// trailing "/".
func NormalAddress(address string) string {
	lower := strings.ToLower(address)
	for _, scheme := range []string{"http://", "https://"} {
		if strings.HasPrefix(lower, scheme) {
			address = address[len(scheme):]
			break
		}
	}
	return strings.TrimRight(address, "/")
}

// Weight is the 8-byte rendezvous weight of address for agentID (compare as bytes).
func Weight(address, agentID string) [8]byte {
	h := sha256.New()
	h.Write([]byte(NormalAddress(address)))
	h.Write([]byte{0})
	h.Write([]byte(agentID))
	var w [8]byte
	copy(w[:], h.Sum(nil))
	return w
}

// RendezvousOrder returns indexes into addresses: the agent's order, first choice first.
func RendezvousOrder(addresses []string, agentID string) []int {
	type keyed struct {
		index  int
		weight [8]byte
		name   []byte
	}
	ks := make([]keyed, len(addresses))
	for i, a := range addresses {
		ks[i] = keyed{i, Weight(a, agentID), []byte(NormalAddress(a))}
	}
	sort.SliceStable(ks, func(i, j int) bool {
		if c := bytes.Compare(ks[i].weight[:], ks[j].weight[:]); c != 0 {
			return c > 0
		}
		return bytes.Compare(ks[i].name, ks[j].name) < 0
	})
	order := make([]int, len(ks))
	for i, k := range ks {
		order[i] = k.index
	}
	return order
}

// newIdempotencyKey is a random (version 4) UUID.
func newIdempotencyKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// fleet keeps which daemons failed lately.
type fleet struct {
	addresses []string
	downFor   time.Duration
	mu        sync.Mutex
	downUntil []time.Time
}

func newFleet(addresses []string, downFor time.Duration) (*fleet, error) {
	seen := map[string]string{}
	for _, a := range addresses {
		n := NormalAddress(a)
		if before, ok := seen[n]; ok {
			return nil, fmt.Errorf("addresses %s and %s name the same daemon", before, a)
		}
		seen[n] = a
	}
	return &fleet{addresses: addresses, downFor: downFor, downUntil: make([]time.Time, len(addresses))}, nil
}

// order is the agent's order with the daemons marked down moved to the end.
func (f *fleet) order(agentID string) []int {
	order := RendezvousOrder(f.addresses, agentID)
	now := time.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	up, down := []int{}, []int{}
	for _, i := range order {
		if f.downUntil[i].After(now) {
			down = append(down, i)
		} else {
			up = append(up, i)
		}
	}
	return append(up, down...)
}

func (f *fleet) markDown(i int) {
	f.mu.Lock()
	f.downUntil[i] = time.Now().Add(f.downFor)
	f.mu.Unlock()
}

func (f *fleet) markUp(i int) {
	f.mu.Lock()
	f.downUntil[i] = time.Time{}
	f.mu.Unlock()
}
