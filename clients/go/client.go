// Package memoryd is a Go client for memoryd, the long-term memory daemon for AI agents.
//
// One Client serves both services (MemoryService and HookService) over one connection.
// Requests and responses are the generated messages of package memorydv1. Every call has
// a deadline (Config.Timeout unless the context already has one); idempotent calls are
// retried while the daemon starts or restarts (UNAVAILABLE); every failure is an *Error
// carrying the gRPC code and the daemon's message.
//
//	c, err := memoryd.New(memoryd.Config{Address: "127.0.0.1:50051"})
//	r, err := c.Store(ctx, &memorydv1.StoreRequest{AgentId: "main", Text: "Deploys happen on Fridays"})
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
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "github.com/memoryd/memoryd/clients/go/memorydv1"
)

// DefaultAddress is where `memoryd serve` listens unless told otherwise.
const DefaultAddress = "127.0.0.1:50051"

// Config configures a Client. The zero value talks plaintext to DefaultAddress.
type Config struct {
	// Address is "host:port"; default DefaultAddress.
	Address string
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
	conn       *grpc.ClientConn
	memory     pb.MemoryServiceClient
	hooks      pb.HookServiceClient
	timeout    time.Duration
	retries    int
	maxBackoff time.Duration
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
	address := cfg.Address
	if address == "" {
		address = DefaultAddress
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
	opts = append(opts, cfg.DialOptions...)
	conn, err := grpc.NewClient(address, opts...)
	if err != nil {
		return nil, wrap(err)
	}
	return &Client{
		conn:       conn,
		memory:     pb.NewMemoryServiceClient(conn),
		hooks:      pb.NewHookServiceClient(conn),
		timeout:    timeout,
		retries:    retries,
		maxBackoff: maxBackoff,
	}, nil
}

// Close ends the connection; calls in flight fail with CANCELLED.
func (c *Client) Close() error { return c.conn.Close() }

// call runs one unary call under the client's deadline (unless ctx has one), retrying
// idempotent calls on UNAVAILABLE with exponential backoff (100 ms doubled up to
// MaxBackoff, each wait between half and all of it so clients do not return in lockstep).
func call[Req, Resp any](ctx context.Context, c *Client, idempotent bool, req Req,
	rpc func(context.Context, Req, ...grpc.CallOption) (Resp, error)) (Resp, error) {
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
		resp, err := rpc(ctx, req)
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
// store twice).
func (c *Client) Store(ctx context.Context, req *pb.StoreRequest) (*pb.StoreResponse, error) {
	return call(ctx, c, req.GetIdempotencyKey() != "", req, c.memory.Store)
}

// Recall returns the memories most relevant to a query, best first.
func (c *Client) Recall(ctx context.Context, req *pb.RecallRequest) (*pb.RecallResponse, error) {
	return call(ctx, c, true, req, c.memory.Recall)
}

// Forget deletes by id, or by query when exactly one match is strong.
func (c *Client) Forget(ctx context.Context, req *pb.ForgetRequest) (*pb.ForgetResponse, error) {
	return call(ctx, c, false, req, c.memory.Forget)
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
	return call(ctx, c, false, req, c.memory.Update)
}

// Get returns one memory.
func (c *Client) Get(ctx context.Context, agentID, id string) (*pb.Memory, error) {
	resp, err := call(ctx, c, true, &pb.GetRequest{AgentId: agentID, Id: id}, c.memory.Get)
	if err != nil {
		return nil, err
	}
	return resp.GetMemory(), nil
}

// List returns one page of memories (newest first unless OldestFirst).
func (c *Client) List(ctx context.Context, req *pb.ListRequest) (*pb.ListResponse, error) {
	return call(ctx, c, true, req, c.memory.List)
}

// Stats counts the memories an agent may read.
func (c *Client) Stats(ctx context.Context, agentID string) (*pb.StatsResponse, error) {
	return call(ctx, c, true, &pb.StatsRequest{AgentId: agentID}, c.memory.Stats)
}

// ListConflicts returns the conflict log entries the agent may read.
func (c *Client) ListConflicts(ctx context.Context, req *pb.ListConflictsRequest) (*pb.ListConflictsResponse, error) {
	return call(ctx, c, true, req, c.memory.ListConflicts)
}

// BuildContext is the before-prompt hook. Hooks have budgets of their own: never retried.
func (c *Client) BuildContext(ctx context.Context, req *pb.BuildContextRequest) (*pb.BuildContextResponse, error) {
	return call(ctx, c, false, req, c.hooks.BuildContext)
}

// Capture is the after-turn hook. Never retried.
func (c *Client) Capture(ctx context.Context, req *pb.CaptureRequest) (*pb.CaptureResponse, error) {
	return call(ctx, c, false, req, c.hooks.Capture)
}

// Export yields every memory the agent may read (no row cap, no deadline of its own:
// bound it with ctx). The sequence ends after the first error.
func (c *Client) Export(ctx context.Context, req *pb.ExportRequest) iter.Seq2[*pb.Memory, error] {
	return func(yield func(*pb.Memory, error) bool) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		stream, err := c.memory.Export(ctx, req)
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
	stream, err := c.memory.Import(ctx)
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
// session should have one.
func (c *Client) Stream(ctx context.Context) (*Session, error) {
	ctx, cancel := context.WithCancel(ctx)
	stream, err := c.memory.Stream(ctx)
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
