// Package memoryd is a Go client for memoryd, the long-term memory daemon for AI agents.
//
// One Client serves the three services (MemoryService, HookService, ReviewService) over one
// connection.
// Requests and responses are the generated messages of package memorydv1. Every call has
// a deadline (Config.Timeout unless the context already has one); idempotent calls are
// retried while the daemon starts or restarts (UNAVAILABLE); every failure is an *Error
// carrying the gRPC code and the daemon's message.
//
//	c, err := memoryd.New(memoryd.Config{Address: "127.0.0.1:50051"})
//	r, err := c.Store(ctx, &memorydv1.StoreRequest{AgentId: "main", Text: "Deploys happen on Fridays"})
//
// Config.Addresses (several daemons serving one store) routes each call by its agent id
// and fails over to the agent's next daemon; routing.go states the rule.
package memoryd

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"iter"
	"math/rand/v2"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "github.com/memoryd/memoryd/clients/go/memorydv1"
)

// DefaultAddress is where `memoryd serve` listens unless told otherwise.
const DefaultAddress = "127.0.0.1:50051"

// Config configures a Client. The zero value talks plaintext to DefaultAddress.
type Config struct {
	// Address is "host:port"; default DefaultAddress.
	Address string
	// Addresses, when it holds more than one, is a fleet of daemons serving one store
	// (Address must then be empty): each call goes to its agent's daemon and fails over
	// (routing.go). One entry is the same as Address.
	Addresses []string
	// ConnectTimeout (a fleet) bounds the wait for a connection to one daemon before the
	// agent's next is tried. Default 1s.
	ConnectTimeout time.Duration
	// DownFor (a fleet) is how long a daemon that failed is skipped. Default 2s.
	DownFor time.Duration
	// Token is sent on every call as "authorization: Bearer <token>" (the daemon's
	// MEMORYD_AUTH_TOKEN). Empty sends none.
	Token string
	// TLS, when set, connects with TLS (e.g. &tls.Config{RootCAs: pool} for a private CA).
	TLS *tls.Config
	// Timeout is the deadline of each unary call, retries included, when the context has
	// none. Default 10s.
	Timeout time.Duration
	// Retries is how many times an idempotent call is retried on UNAVAILABLE. Default 3;
	// negative disables retries.
	Retries int
	// MaxBackoff bounds one wait between retries (100 ms, doubled each time, with
	// jitter). Default 2s.
	MaxBackoff time.Duration
	// DialOptions are appended to the client's own (e.g. extra interceptors).
	DialOptions []grpc.DialOption
}

// Client is safe for concurrent use. Close it when done.
type Client struct {
	endpoints      []*endpoint
	fleet          *fleet // nil for one daemon
	connectTimeout time.Duration
	timeout        time.Duration
	retries        int
	maxBackoff     time.Duration
}

// endpoint is one daemon: its connection and the three service clients over it.
type endpoint struct {
	address string
	conn    *grpc.ClientConn
	memory  pb.MemoryServiceClient
	hooks   pb.HookServiceClient
	review  pb.ReviewServiceClient
}

// connected reports whether the daemon is connected, or connects within timeout; false
// at once when its last attempt failed (grpc keeps reconnecting in the background).
func (e *endpoint) connected(ctx context.Context, timeout time.Duration) bool {
	state := e.conn.GetState()
	if state == connectivity.Idle {
		e.conn.Connect()
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		switch state {
		case connectivity.Ready:
			return true
		case connectivity.TransientFailure, connectivity.Shutdown:
			return false
		}
		if !e.conn.WaitForStateChange(ctx, state) {
			return false
		}
		state = e.conn.GetState()
	}
}

// Error is every failed call: the gRPC status code and the daemon's message.
// status.Code(err) and status.FromError(err) work on it too.
type Error struct {
	Code    codes.Code
	Message string
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %s", codeName(e.Code), e.Message) }

// GRPCStatus lets the grpc/status package read the code back.
func (e *Error) GRPCStatus() *status.Status { return status.New(e.Code, e.Message) }

// codeName is the canonical upper-case name ("INVALID_ARGUMENT").
func codeName(c codes.Code) string {
	names := map[codes.Code]string{
		codes.OK: "OK", codes.Canceled: "CANCELLED", codes.Unknown: "UNKNOWN",
		codes.InvalidArgument: "INVALID_ARGUMENT", codes.DeadlineExceeded: "DEADLINE_EXCEEDED",
		codes.NotFound: "NOT_FOUND", codes.AlreadyExists: "ALREADY_EXISTS",
		codes.PermissionDenied: "PERMISSION_DENIED", codes.ResourceExhausted: "RESOURCE_EXHAUSTED",
		codes.FailedPrecondition: "FAILED_PRECONDITION", codes.Aborted: "ABORTED",
		codes.OutOfRange: "OUT_OF_RANGE", codes.Unimplemented: "UNIMPLEMENTED",
		codes.Internal: "INTERNAL", codes.Unavailable: "UNAVAILABLE", codes.DataLoss: "DATA_LOSS",
		codes.Unauthenticated: "UNAUTHENTICATED",
	}
	if n, ok := names[c]; ok {
		return n
	}
	return c.String()
}

// CodeName is the canonical name of an error's gRPC code ("NOT_FOUND"), "OK" for nil.
func CodeName(err error) string {
	if err == nil {
		return "OK"
	}
	return codeName(status.Code(err))
}

func wrap(err error) error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return &Error{Code: codes.DeadlineExceeded, Message: err.Error()}
	}
	if errors.Is(err, context.Canceled) {
		return &Error{Code: codes.Canceled, Message: err.Error()}
	}
	s := status.Convert(err)
	return &Error{Code: s.Code(), Message: s.Message()}
}

// New makes a client. It does not connect: the first call does (and retries while the
// daemon starts, for idempotent calls).
func New(cfg Config) (*Client, error) {
	addresses := cfg.Addresses
	if len(addresses) > 0 && cfg.Address != "" {
		return nil, &Error{Code: codes.InvalidArgument, Message: "set Address or Addresses, not both"}
	}
	if len(addresses) == 0 {
		address := cfg.Address
		if address == "" {
			address = DefaultAddress
		}
		addresses = []string{address}
	}
	var fl *fleet
	if len(addresses) > 1 {
		downFor := cfg.DownFor
		if downFor <= 0 {
			downFor = 2 * time.Second
		}
		var err error
		if fl, err = newFleet(addresses, downFor); err != nil {
			return nil, &Error{Code: codes.InvalidArgument, Message: err.Error()}
		}
	}
	connectTimeout := cfg.ConnectTimeout
	if connectTimeout <= 0 {
		connectTimeout = time.Second
	}
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	retries := cfg.Retries
	if retries == 0 {
		retries = 3
	} else if retries < 0 {
		retries = 0
	}
	maxBackoff := cfg.MaxBackoff
	if maxBackoff <= 0 {
		maxBackoff = 2 * time.Second
	}
	creds := insecure.NewCredentials()
	if cfg.TLS != nil {
		creds = credentials.NewTLS(cfg.TLS)
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(creds)}
	if cfg.Token != "" {
		bearer := "Bearer " + cfg.Token
		opts = append(opts,
			grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any,
				cc *grpc.ClientConn, invoker grpc.UnaryInvoker, o ...grpc.CallOption) error {
				ctx = metadata.AppendToOutgoingContext(ctx, "authorization", bearer)
				return invoker(ctx, method, req, reply, cc, o...)
			}),
			grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc,
				cc *grpc.ClientConn, method string, streamer grpc.Streamer,
				o ...grpc.CallOption) (grpc.ClientStream, error) {
				ctx = metadata.AppendToOutgoingContext(ctx, "authorization", bearer)
				return streamer(ctx, desc, cc, method, o...)
			}))
	}
	if fl != nil {
		// A daemon that was down is reconnected to within a second of its return (grpc's
		// default back-off grows to two minutes), so its agents come back to it.
		opts = append(opts, grpc.WithConnectParams(grpc.ConnectParams{
			Backoff: backoff.Config{BaseDelay: 200 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2,
				MaxDelay: time.Second},
			MinConnectTimeout: connectTimeout,
		}))
	}
	opts = append(opts, cfg.DialOptions...)
	c := &Client{fleet: fl, connectTimeout: connectTimeout, timeout: timeout, retries: retries,
		maxBackoff: maxBackoff}
	for _, address := range addresses {
		conn, err := grpc.NewClient(address, opts...)
		if err != nil {
			_ = c.Close()
			return nil, wrap(err)
		}
		c.endpoints = append(c.endpoints, &endpoint{address: address, conn: conn,
			memory: pb.NewMemoryServiceClient(conn), hooks: pb.NewHookServiceClient(conn),
			review: pb.NewReviewServiceClient(conn)})
	}
	return c, nil
}

// Close ends the connections; calls in flight fail with CANCELLED.
func (c *Client) Close() error {
	var first error
	for _, e := range c.endpoints {
		if err := e.conn.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// DaemonsFor returns the daemons that serve agentID, first choice first.
func (c *Client) DaemonsFor(agentID string) []string {
	addresses := make([]string, len(c.endpoints))
	for i, e := range c.endpoints {
		addresses[i] = e.address
	}
	out := make([]string, 0, len(addresses))
	for _, i := range RendezvousOrder(addresses, agentID) {
		out = append(out, addresses[i])
	}
	return out
}

// keyed gives a Store or Capture over a fleet an idempotency key when it has none (on a
// copy: the caller's request is not changed).
func keyed[M interface {
	proto.Message
	GetIdempotencyKey() string
}](c *Client, req M, set func(M, string)) M {
	if c.fleet == nil || req.GetIdempotencyKey() != "" {
		return req
	}
	clone := proto.Clone(req).(M)
	set(clone, newIdempotencyKey())
	return clone
}

// rpcFunc is one unary RPC of a generated client.
type rpcFunc[Req, Resp any] func(context.Context, Req, ...grpc.CallOption) (Resp, error)

// route sends one attempt to the agent's daemons in order until one answers (routing.go).
func route[Req, Resp any](ctx context.Context, c *Client, agentID string, idempotent bool, req Req,
	rpc func(*endpoint) rpcFunc[Req, Resp]) (Resp, error) {
	if c.fleet == nil {
		return rpc(c.endpoints[0])(ctx, req)
	}
	var zero Resp
	var failed error
	for _, i := range c.fleet.order(agentID) {
		e := c.endpoints[i]
		if !e.connected(ctx, c.connectTimeout) {
			c.fleet.markDown(i) // nothing was sent: any call may go on
			failed = status.Errorf(codes.Unavailable, "no connection to the daemon at %s (refused, or none within ConnectTimeout %v)", e.address, c.connectTimeout)
			continue
		}
		resp, err := rpc(e)(ctx, req)
		if err == nil {
			c.fleet.markUp(i)
			return resp, nil
		}
		if status.Code(err) != codes.Unavailable {
			return zero, err
		}
		c.fleet.markDown(i)
		if !idempotent {
			return zero, err // it may have reached the daemon: never sent again
		}
		failed = err
	}
	return zero, failed
}

// pick is the daemon for a streaming call (never sent again once it starts).
func (c *Client) pick(ctx context.Context, agentID string) (*endpoint, error) {
	if c.fleet == nil {
		return c.endpoints[0], nil
	}
	var e *endpoint
	for _, i := range c.fleet.order(agentID) {
		e = c.endpoints[i]
		if e.connected(ctx, c.connectTimeout) {
			return e, nil
		}
		c.fleet.markDown(i)
	}
	return nil, &Error{Code: codes.Unavailable, Message: "no connection to the daemon at " + e.address}
}

// call runs one unary call under the client's deadline (unless ctx has one), retrying
// idempotent calls on UNAVAILABLE with exponential backoff (100 ms doubled up to
// MaxBackoff, each wait between half and all of it so clients do not return in lockstep).
//
// Over a fleet each attempt is one pass over the agent's daemons; failover needs
// `failover` (safe to send again), retries after a back-off need `idempotent` too.
func call[Req interface{ GetAgentId() string }, Resp any](ctx context.Context, c *Client, idempotent bool, req Req,
	rpc func(*endpoint) rpcFunc[Req, Resp]) (Resp, error) {
	return callFailover(ctx, c, idempotent, idempotent, req, rpc)
}

func callFailover[Req interface{ GetAgentId() string }, Resp any](ctx context.Context, c *Client, idempotent, failover bool, req Req,
	rpc func(*endpoint) rpcFunc[Req, Resp]) (Resp, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	attempts := 1
	if idempotent {
		attempts += c.retries
	}
	backoff := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		resp, err := route(ctx, c, req.GetAgentId(), failover, req, rpc)
		if err == nil {
			return resp, nil
		}
		if status.Code(err) != codes.Unavailable || attempt >= attempts {
			return resp, wrap(err)
		}
		wait := min(backoff, c.maxBackoff)
		wait = wait/2 + rand.N(wait/2+1)
		if deadline, _ := ctx.Deadline(); time.Now().Add(wait).After(deadline) {
			return resp, wrap(err) // no time for another attempt: the real cause is more useful
		}
		select {
		case <-ctx.Done():
			return resp, wrap(err)
		case <-time.After(wait):
		}
		backoff *= 2
	}
}

// Store writes a memory. It is retried only with an IdempotencyKey (a retry then cannot
// store twice); over a fleet it always has one (made here when the request has none).
func (c *Client) Store(ctx context.Context, req *pb.StoreRequest) (*pb.StoreResponse, error) {
	req = keyed(c, req, func(r *pb.StoreRequest, k string) { r.IdempotencyKey = k })
	return call(ctx, c, req.GetIdempotencyKey() != "", req, func(e *endpoint) rpcFunc[*pb.StoreRequest, *pb.StoreResponse] { return e.memory.Store })
}

// Recall returns the memories most relevant to a query, best first.
func (c *Client) Recall(ctx context.Context, req *pb.RecallRequest) (*pb.RecallResponse, error) {
	return call(ctx, c, true, req, func(e *endpoint) rpcFunc[*pb.RecallRequest, *pb.RecallResponse] { return e.memory.Recall })
}

// Forget deletes by id, or by query when exactly one match is strong.
func (c *Client) Forget(ctx context.Context, req *pb.ForgetRequest) (*pb.ForgetResponse, error) {
	return call(ctx, c, false, req, func(e *endpoint) rpcFunc[*pb.ForgetRequest, *pb.ForgetResponse] { return e.memory.Forget })
}

// ForgetID is Forget by id.
func (c *Client) ForgetID(ctx context.Context, agentID, id string) (*pb.ForgetResponse, error) {
	return c.Forget(ctx, &pb.ForgetRequest{AgentId: agentID, Target: &pb.ForgetRequest_Id{Id: id}})
}

// ForgetQuery is Forget by query.
func (c *Client) ForgetQuery(ctx context.Context, agentID, query string) (*pb.ForgetResponse, error) {
	return c.Forget(ctx, &pb.ForgetRequest{AgentId: agentID, Target: &pb.ForgetRequest_Query{Query: query}})
}

// Update changes a memory's text, importance, category, metadata or expiry.
func (c *Client) Update(ctx context.Context, req *pb.UpdateRequest) (*pb.UpdateResponse, error) {
	return call(ctx, c, false, req, func(e *endpoint) rpcFunc[*pb.UpdateRequest, *pb.UpdateResponse] { return e.memory.Update })
}

// Get returns one memory.
func (c *Client) Get(ctx context.Context, agentID, id string) (*pb.Memory, error) {
	resp, err := call(ctx, c, true, &pb.GetRequest{AgentId: agentID, Id: id},
		func(e *endpoint) rpcFunc[*pb.GetRequest, *pb.GetResponse] { return e.memory.Get })
	if err != nil {
		return nil, err
	}
	return resp.GetMemory(), nil
}

// List returns one page of memories (newest first unless OldestFirst).
func (c *Client) List(ctx context.Context, req *pb.ListRequest) (*pb.ListResponse, error) {
	return call(ctx, c, true, req, func(e *endpoint) rpcFunc[*pb.ListRequest, *pb.ListResponse] { return e.memory.List })
}

// Stats counts the memories an agent may read.
func (c *Client) Stats(ctx context.Context, agentID string) (*pb.StatsResponse, error) {
	return call(ctx, c, true, &pb.StatsRequest{AgentId: agentID},
		func(e *endpoint) rpcFunc[*pb.StatsRequest, *pb.StatsResponse] { return e.memory.Stats })
}

// ListConflicts returns the conflict log entries the agent may read.
func (c *Client) ListConflicts(ctx context.Context, req *pb.ListConflictsRequest) (*pb.ListConflictsResponse, error) {
	return call(ctx, c, true, req, func(e *endpoint) rpcFunc[*pb.ListConflictsRequest, *pb.ListConflictsResponse] {
		return e.memory.ListConflicts
	})
}

// ReviewPrepare returns review proposals (near duplicates, conflicts, stale memories,
// promotions asked for) over what the agent may read. It changes nothing: retried.
func (c *Client) ReviewPrepare(ctx context.Context, req *pb.PrepareReviewRequest) (*pb.PrepareReviewResponse, error) {
	return call(ctx, c, true, req, func(e *endpoint) rpcFunc[*pb.PrepareReviewRequest, *pb.PrepareReviewResponse] {
		return e.review.Prepare
	})
}

// ReviewApply applies approved review items, each re-validated and applied whole. Retried:
// a second Apply of the same items changes nothing (ALREADY_APPLIED).
func (c *Client) ReviewApply(ctx context.Context, req *pb.ApplyReviewRequest) (*pb.ApplyReviewResponse, error) {
	return call(ctx, c, true, req, func(e *endpoint) rpcFunc[*pb.ApplyReviewRequest, *pb.ApplyReviewResponse] { return e.review.Apply })
}

// BuildContext is the before-prompt hook. Hooks have budgets of their own: never retried
// (over a fleet this read fails over to the agent's next daemon).
func (c *Client) BuildContext(ctx context.Context, req *pb.BuildContextRequest) (*pb.BuildContextResponse, error) {
	return callFailover(ctx, c, false, true, req, func(e *endpoint) rpcFunc[*pb.BuildContextRequest, *pb.BuildContextResponse] {
		return e.hooks.BuildContext
	})
}

// Capture is the after-turn hook. Never retried; over a fleet it carries an idempotency
// key (made here when the request has none) and fails over without storing twice.
func (c *Client) Capture(ctx context.Context, req *pb.CaptureRequest) (*pb.CaptureResponse, error) {
	req = keyed(c, req, func(r *pb.CaptureRequest, k string) { r.IdempotencyKey = k })
	return callFailover(ctx, c, false, req.GetIdempotencyKey() != "", req, func(e *endpoint) rpcFunc[*pb.CaptureRequest, *pb.CaptureResponse] { return e.hooks.Capture })
}

// Export yields every memory the agent may read (no row cap, no deadline of its own:
// bound it with ctx). The sequence ends after the first error.
func (c *Client) Export(ctx context.Context, req *pb.ExportRequest) iter.Seq2[*pb.Memory, error] {
	return func(yield func(*pb.Memory, error) bool) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		e, err := c.pick(ctx, req.GetAgentId())
		if err != nil {
			yield(nil, err)
			return
		}
		stream, err := e.memory.Export(ctx, req)
		if err != nil {
			yield(nil, wrap(err))
			return
		}
		for {
			m, err := stream.Recv()
			if err == io.EOF {
				return
			}
			if err != nil {
				yield(nil, wrap(err))
				return
			}
			if !yield(m, nil) {
				return
			}
		}
	}
}

// Import streams memories (e.g. from Export) into the daemon under agentID; it re-embeds
// them. Refused memories are reported in the response; the others are imported.
func (c *Client) Import(ctx context.Context, agentID string, memories iter.Seq[*pb.Memory]) (*pb.ImportResponse, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	e, err := c.pick(ctx, agentID)
	if err != nil {
		return nil, err
	}
	stream, err := e.memory.Import(ctx)
	if err != nil {
		return nil, wrap(err)
	}
	for m := range memories {
		if err := stream.Send(&pb.ImportRequest{AgentId: agentID, Memory: m}); err != nil {
			// The server ended the call; CloseAndRecv has its status.
			break
		}
	}
	resp, err := stream.CloseAndRecv()
	return resp, wrap(err)
}

// Session is one Stream: send ops with Send, read answers (matched by RequestId, in
// completion order) with Recv until it returns io.EOF. A failing op comes back as a
// response carrying an Error; the session goes on.
type Session struct {
	stream grpc.BidiStreamingClient[pb.StreamRequest, pb.StreamResponse]
	cancel context.CancelFunc
}

// Stream opens a session. It lasts until ctx ends or Close; give ctx a deadline if the
// session should have one. Over a fleet it goes to agent ""'s daemon; StreamFor chooses.
func (c *Client) Stream(ctx context.Context) (*Session, error) { return c.StreamFor(ctx, "") }

// StreamFor opens a session on agentID's daemon (the agent whose ops it carries).
func (c *Client) StreamFor(ctx context.Context, agentID string) (*Session, error) {
	e, err := c.pick(ctx, agentID)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	stream, err := e.memory.Stream(ctx)
	if err != nil {
		cancel()
		return nil, wrap(err)
	}
	return &Session{stream: stream, cancel: cancel}, nil
}

// Send queues one op. An error here means the session is over; Recv tells why.
func (s *Session) Send(req *pb.StreamRequest) error { return wrap(s.stream.Send(req)) }

// CloseSend says no more ops will come; Recv returns io.EOF after the last answer.
func (s *Session) CloseSend() error { return wrap(s.stream.CloseSend()) }

// Recv returns the next answer, io.EOF at the end, or an *Error if the session failed.
func (s *Session) Recv() (*pb.StreamResponse, error) {
	resp, err := s.stream.Recv()
	if err == io.EOF {
		return nil, io.EOF
	}
	return resp, wrap(err)
}

// Close ends the session at once (ops still pending are cancelled).
func (s *Session) Close() { s.cancel() }
