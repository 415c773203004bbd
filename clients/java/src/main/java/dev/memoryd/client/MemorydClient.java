package dev.memoryd.client;

import dev.memoryd.v1.ApplyReviewRequest;
import dev.memoryd.v1.ApplyReviewResponse;
import dev.memoryd.v1.BuildContextRequest;
import dev.memoryd.v1.BuildContextResponse;
import dev.memoryd.v1.CaptureRequest;
import dev.memoryd.v1.CaptureResponse;
import dev.memoryd.v1.ExportRequest;
import dev.memoryd.v1.ForgetRequest;
import dev.memoryd.v1.ForgetResponse;
import dev.memoryd.v1.GetRequest;
import dev.memoryd.v1.HookServiceGrpc;
import dev.memoryd.v1.ImportRequest;
import dev.memoryd.v1.ImportResponse;
import dev.memoryd.v1.ListConflictsRequest;
import dev.memoryd.v1.ListConflictsResponse;
import dev.memoryd.v1.ListRequest;
import dev.memoryd.v1.ListResponse;
import dev.memoryd.v1.Memory;
import dev.memoryd.v1.MemoryServiceGrpc;
import dev.memoryd.v1.PrepareReviewRequest;
import dev.memoryd.v1.PrepareReviewResponse;
import dev.memoryd.v1.RecallRequest;
import dev.memoryd.v1.RecallResponse;
import dev.memoryd.v1.ReviewServiceGrpc;
import dev.memoryd.v1.StatsRequest;
import dev.memoryd.v1.StatsResponse;
import dev.memoryd.v1.StoreRequest;
import dev.memoryd.v1.StoreResponse;
import dev.memoryd.v1.UpdateRequest;
import dev.memoryd.v1.UpdateResponse;
import io.grpc.ChannelCredentials;
import io.grpc.ClientInterceptor;
import io.grpc.ConnectivityState;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.TlsChannelCredentials;
import io.grpc.stub.AbstractStub;
import io.grpc.stub.MetadataUtils;
import io.grpc.stub.StreamObserver;
import java.io.File;
import java.io.IOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.NoSuchElementException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.function.BiFunction;
import java.util.function.Function;

/**
 * The memoryd client: one object for MemoryService, HookService and ReviewService over one
 * connection.
 *
 * <p>Every unary call has a deadline (retries included); idempotent calls are retried while
 * the daemon starts or restarts (UNAVAILABLE); every failure is a {@link MemorydException}
 * carrying the gRPC code and the daemon's message. Thread-safe; close it when done.
 *
 * <pre>{@code
 * try (MemorydClient c = MemorydClient.builder().address("127.0.0.1:50051").build()) {
 *   StoreResponse r = c.store(StoreRequest.newBuilder().setAgentId("main").setText("...").build());
 * }
 * }</pre>
 *
 * <p>{@link Builder#addresses} (several daemons serving one store) routes each call by its agent
 * id ({@link Routing}) and fails over to the agent's next daemon: any call when a daemon cannot
 * be reached (nothing was sent; refused, or no connection within connectTimeout), and on
 * UNAVAILABLE the calls safe to send again (reads, and store and capture, which over a fleet
 * always carry an idempotency key, made here when the request has none). Update, forget and
 * every other error are thrown as they are. A daemon that failed is skipped for downFor.
 */
public final class MemorydClient implements AutoCloseable {
  public static final String DEFAULT_ADDRESS = "127.0.0.1:50051";

  /** One daemon: its channel and the stubs over it. */
  private record Endpoint(
      String address,
      ManagedChannel channel,
      MemoryServiceGrpc.MemoryServiceBlockingStub memory,
      MemoryServiceGrpc.MemoryServiceStub memoryAsync,
      HookServiceGrpc.HookServiceBlockingStub hooks,
      ReviewServiceGrpc.ReviewServiceBlockingStub review) {}

  private final List<Endpoint> endpoints = new ArrayList<>();
  private final Routing.Fleet fleet; // null for one daemon
  private final Duration connectTimeout;
  private final Duration timeout;
  private final int retries;
  private final Duration maxBackoff;

  private MemorydClient(Builder b) throws IOException {
    ChannelCredentials creds;
    if (b.tls) {
      TlsChannelCredentials.Builder tls = TlsChannelCredentials.newBuilder();
      if (b.trustedCa != null) {
        tls.trustManager(b.trustedCa);
      }
      creds = tls.build();
    } else {
      creds = InsecureChannelCredentials.create();
    }
    List<ClientInterceptor> interceptors = new ArrayList<>();
    if (b.token != null && !b.token.isEmpty()) {
      Metadata headers = new Metadata();
      headers.put(
          Metadata.Key.of("authorization", Metadata.ASCII_STRING_MARSHALLER), "Bearer " + b.token);
      interceptors.add(MetadataUtils.newAttachHeadersInterceptor(headers));
    }
    List<String> addresses = b.addresses.isEmpty() ? List.of(b.address) : List.copyOf(b.addresses);
    Routing.checkAddresses(addresses);
    for (String address : addresses) {
      var builder = Grpc.newChannelBuilder(address, creds);
      if (b.authority != null) {
        builder.overrideAuthority(b.authority);
      }
      builder.intercept(interceptors);
      ManagedChannel channel = builder.build();
      endpoints.add(
          new Endpoint(
              address,
              channel,
              MemoryServiceGrpc.newBlockingStub(channel),
              MemoryServiceGrpc.newStub(channel),
              HookServiceGrpc.newBlockingStub(channel),
              ReviewServiceGrpc.newBlockingStub(channel)));
    }
    this.fleet =
        addresses.size() > 1 ? new Routing.Fleet(addresses, b.downFor.toNanos()) : null;
    this.connectTimeout = b.connectTimeout;
    this.timeout = b.timeout;
    this.retries = b.retries;
    this.maxBackoff = b.maxBackoff;
  }

  public static Builder builder() {
    return new Builder();
  }

  /** Settings of a client; the defaults talk plaintext to {@value #DEFAULT_ADDRESS}. */
  public static final class Builder {
    private String address = DEFAULT_ADDRESS;
    private List<String> addresses = List.of();
    private Duration connectTimeout = Duration.ofSeconds(1);
    private Duration downFor = Duration.ofSeconds(2);
    private String token;
    private boolean tls;
    private File trustedCa;
    private String authority;
    private Duration timeout = Duration.ofSeconds(10);
    private int retries = 3;
    private Duration maxBackoff = Duration.ofSeconds(2);

    /** "host:port". */
    public Builder address(String address) {
      this.address = address;
      return this;
    }

    /**
     * Several daemons serving one store (a fleet; {@link #address} is then not used): each
     * call goes to its agent's daemon and fails over ({@link Routing}).
     */
    public Builder addresses(List<String> addresses) {
      this.addresses = List.copyOf(addresses);
      return this;
    }

    /** Over a fleet: the longest wait for a connection to one daemon. Default 1 s. */
    public Builder connectTimeout(Duration connectTimeout) {
      this.connectTimeout = connectTimeout;
      return this;
    }

    /** Over a fleet: how long a daemon that failed is skipped. Default 2 s. */
    public Builder downFor(Duration downFor) {
      this.downFor = downFor;
      return this;
    }

    /** Sent on every call as "authorization: Bearer TOKEN" (the daemon's MEMORYD_AUTH_TOKEN). */
    public Builder token(String token) {
      this.token = token;
      return this;
    }

    /** Connect with TLS, trusting the JVM's CAs. */
    public Builder tls() {
      this.tls = true;
      return this;
    }

    /** Connect with TLS, trusting the CA certificates of this PEM file. */
    public Builder tls(File trustedCaPem) {
      this.tls = true;
      this.trustedCa = trustedCaPem;
      return this;
    }

    /** The server name to verify, when it differs from the address's host. */
    public Builder authority(String authority) {
      this.authority = authority;
      return this;
    }

    /** Deadline of each unary call, retries included. Default 10 s. */
    public Builder timeout(Duration timeout) {
      this.timeout = timeout;
      return this;
    }

    /** Retries of idempotent calls on UNAVAILABLE. Default 3. */
    public Builder retries(int retries) {
      this.retries = retries;
      return this;
    }

    /** Upper bound of one wait between retries (100 ms, doubled each time, with jitter). */
    public Builder maxBackoff(Duration maxBackoff) {
      this.maxBackoff = maxBackoff;
      return this;
    }

    /** Makes the client; it connects on the first call. */
    public MemorydClient build() {
      try {
        return new MemorydClient(this);
      } catch (IOException e) {
        throw new MemorydException(Status.Code.INVALID_ARGUMENT, "tls: " + e.getMessage());
      } catch (IllegalArgumentException e) {
        throw new MemorydException(Status.Code.INVALID_ARGUMENT, e.getMessage());
      }
    }
  }

  /**
   * One unary call under the client's deadline; idempotent calls are retried on UNAVAILABLE
   * with exponential backoff (100 ms doubled up to maxBackoff; each wait between half and all
   * of it, so clients do not return in lockstep) while the deadline allows.
   */
  private <S extends AbstractStub<S>, Req, Resp> Resp call(
      Function<Endpoint, S> stub,
      String agentId,
      boolean idempotent,
      boolean failover,
      Req request,
      BiFunction<S, Req, Resp> rpc) {
    long deadline = System.nanoTime() + timeout.toNanos();
    int attempts = 1 + (idempotent ? retries : 0);
    long backoffMs = 100;
    for (int attempt = 1; ; attempt++) {
      try {
        return route(stub, agentId, failover, request, rpc, deadline);
      } catch (StatusRuntimeException e) {
        boolean retry = e.getStatus().getCode() == Status.Code.UNAVAILABLE && attempt < attempts;
        long bound = Math.min(backoffMs, maxBackoff.toMillis());
        long waitMs = bound / 2 + ThreadLocalRandom.current().nextLong(bound / 2 + 1);
        // No time for another attempt: the real cause is more useful than a bare timeout.
        if (!retry || System.nanoTime() + waitMs * 1_000_000 >= deadline) {
          throw MemorydException.of(e);
        }
        try {
          Thread.sleep(waitMs);
        } catch (InterruptedException ie) {
          Thread.currentThread().interrupt();
          throw new MemorydException(Status.Code.CANCELLED, "interrupted");
        }
        backoffMs *= 2;
      }
    }
  }

  /** One pass over the agent's daemons, until one answers (see the class comment). */
  private <S extends AbstractStub<S>, Req, Resp> Resp route(
      Function<Endpoint, S> stub,
      String agentId,
      boolean failover,
      Req request,
      BiFunction<S, Req, Resp> rpc,
      long deadline) {
    if (fleet == null) {
      long left = deadline - System.nanoTime();
      S one = stub.apply(endpoints.get(0));
      return rpc.apply(one.withDeadlineAfter(Math.max(left, 0), TimeUnit.NANOSECONDS), request);
    }
    StatusRuntimeException failed = null;
    for (int i : fleet.order(agentId)) {
      Endpoint e = endpoints.get(i);
      if (!connected(e.channel(), connectTimeout)) {
        fleet.markDown(i); // nothing was sent: any call may go on
        failed = noConnection(e);
        continue;
      }
      long left = deadline - System.nanoTime();
      try {
        S one = stub.apply(e);
        Resp response =
            rpc.apply(one.withDeadlineAfter(Math.max(left, 0), TimeUnit.NANOSECONDS), request);
        fleet.markUp(i);
        return response;
      } catch (StatusRuntimeException x) {
        if (x.getStatus().getCode() != Status.Code.UNAVAILABLE) {
          throw x;
        }
        fleet.markDown(i);
        if (!failover) {
          throw x; // it may have reached the daemon: never sent again
        }
        failed = x;
      }
    }
    throw failed;
  }

  private StatusRuntimeException noConnection(Endpoint e) {
    return Status.UNAVAILABLE
        .withDescription(
            "no connection to the daemon at "
                + e.address()
                + " (refused, or none within connectTimeout "
                + connectTimeout.toMillis()
                + " ms)")
        .asRuntimeException();
  }

  /**
   * Whether the channel is connected, or connects within {@code timeout}; false at once when
   * its last attempt failed (it is then asked to try again without waiting for its back-off, so
   * a daemon that is back is found by the next call that prefers it).
   */
  private static boolean connected(ManagedChannel channel, Duration timeout) {
    long deadline = System.nanoTime() + timeout.toNanos();
    ConnectivityState state = channel.getState(true);
    while (true) {
      if (state == ConnectivityState.READY) {
        return true;
      }
      if (state == ConnectivityState.TRANSIENT_FAILURE || state == ConnectivityState.SHUTDOWN) {
        channel.resetConnectBackoff();
        return false;
      }
      CountDownLatch changed = new CountDownLatch(1);
      channel.notifyWhenStateChanged(state, changed::countDown);
      long left = deadline - System.nanoTime();
      try {
        if (left <= 0 || !changed.await(left, TimeUnit.NANOSECONDS)) {
          return false;
        }
      } catch (InterruptedException x) {
        Thread.currentThread().interrupt();
        return false;
      }
      state = channel.getState(false);
    }
  }

  /** The daemon for a streaming call (never sent again once it starts). */
  private Endpoint pick(String agentId) {
    if (fleet == null) {
      return endpoints.get(0);
    }
    Endpoint e = null;
    for (int i : fleet.order(agentId)) {
      e = endpoints.get(i);
      if (connected(e.channel(), connectTimeout)) {
        return e;
      }
      fleet.markDown(i);
    }
    throw MemorydException.of(noConnection(e));
  }

  /** The daemons that serve {@code agentId}, first choice first. */
  public List<String> daemonsFor(String agentId) {
    List<String> addresses = endpoints.stream().map(Endpoint::address).toList();
    List<String> out = new ArrayList<>();
    for (int i : Routing.rendezvousOrder(addresses, agentId)) {
      out.add(addresses.get(i));
    }
    return out;
  }

  /**
   * Stores a memory. Retried only with an idempotency key (a retry cannot store twice); over a
   * fleet it always has one (made here when the request has none).
   */
  public StoreResponse store(StoreRequest request) {
    if (fleet != null && request.getIdempotencyKey().isEmpty()) {
      request = request.toBuilder().setIdempotencyKey(Routing.newIdempotencyKey()).build();
    }
    boolean keyed = !request.getIdempotencyKey().isEmpty();
    return call(
        Endpoint::memory, request.getAgentId(), keyed, keyed, request, (s, r) -> s.store(r));
  }

  /** The memories most relevant to a query, best first. */
  public RecallResponse recall(RecallRequest request) {
    return call(
        Endpoint::memory, request.getAgentId(), true, true, request, (s, r) -> s.recall(r));
  }

  /** Deletes by id, or by query when exactly one match is strong. */
  public ForgetResponse forget(ForgetRequest request) {
    return call(
        Endpoint::memory, request.getAgentId(), false, false, request, (s, r) -> s.forget(r));
  }

  /** Forget by id. */
  public ForgetResponse forgetId(String agentId, String id) {
    return forget(ForgetRequest.newBuilder().setAgentId(agentId).setId(id).build());
  }

  /** Forget by query. */
  public ForgetResponse forgetQuery(String agentId, String query) {
    return forget(ForgetRequest.newBuilder().setAgentId(agentId).setQuery(query).build());
  }

  /** Changes a memory's text, importance, category, metadata or expiry. */
  public UpdateResponse update(UpdateRequest request) {
    return call(
        Endpoint::memory, request.getAgentId(), false, false, request, (s, r) -> s.update(r));
  }

  /** One memory. */
  public Memory get(String agentId, String id) {
    GetRequest request = GetRequest.newBuilder().setAgentId(agentId).setId(id).build();
    return call(Endpoint::memory, agentId, true, true, request, (s, r) -> s.get(r)).getMemory();
  }

  /** One page of memories, newest first unless oldest_first. */
  public ListResponse list(ListRequest request) {
    return call(
        Endpoint::memory, request.getAgentId(), true, true, request, (s, r) -> s.list(r));
  }

  /** Counts of what an agent may read. */
  public StatsResponse stats(String agentId) {
    StatsRequest request = StatsRequest.newBuilder().setAgentId(agentId).build();
    return call(
        Endpoint::memory, request.getAgentId(), true, true, request, (s, r) -> s.stats(r));
  }

  /** The conflict log entries the agent may read. */
  public ListConflictsResponse listConflicts(ListConflictsRequest request) {
    return call(
        Endpoint::memory, request.getAgentId(), true, true, request, (s, r) -> s.listConflicts(r));
  }

  /**
   * Review proposals (ReviewService.Prepare) over what the agent may read: near duplicates,
   * conflicts, stale memories, promotions asked for. Changes nothing: retried.
   */
  public PrepareReviewResponse reviewPrepare(PrepareReviewRequest request) {
    return call(
        Endpoint::review, request.getAgentId(), true, true, request, (s, r) -> s.prepare(r));
  }

  /**
   * Applies approved review items (ReviewService.Apply), each re-validated and applied whole.
   * Retried: a second Apply of the same items changes nothing (ALREADY_APPLIED).
   */
  public ApplyReviewResponse reviewApply(ApplyReviewRequest request) {
    return call(
        Endpoint::review, request.getAgentId(), true, true, request, (s, r) -> s.apply(r));
  }

  /**
   * The before-prompt hook. Hooks have budgets of their own: never retried (over a fleet this
   * read fails over to the agent's next daemon).
   */
  public BuildContextResponse buildContext(BuildContextRequest request) {
    return call(
        Endpoint::hooks, request.getAgentId(), false, true, request, (s, r) -> s.buildContext(r));
  }

  /**
   * The after-turn hook. Never retried; over a fleet it carries an idempotency key (made here
   * when the request has none) and fails over without storing twice.
   */
  public CaptureResponse capture(CaptureRequest request) {
    if (fleet != null && request.getIdempotencyKey().isEmpty()) {
      request = request.toBuilder().setIdempotencyKey(Routing.newIdempotencyKey()).build();
    }
    boolean keyed = !request.getIdempotencyKey().isEmpty();
    return call(
        Endpoint::hooks, request.getAgentId(), false, keyed, request, (s, r) -> s.capture(r));
  }

  /**
   * Every memory the agent may read, streamed (no row cap and no deadline). The iterator
   * throws {@link MemorydException} on failure.
   */
  public Iterator<Memory> export(ExportRequest request) {
    Iterator<Memory> inner;
    try {
      inner = pick(request.getAgentId()).memory().export(request);
    } catch (StatusRuntimeException e) {
      throw MemorydException.of(e);
    }
    return new Iterator<>() {
      @Override
      public boolean hasNext() {
        try {
          return inner.hasNext();
        } catch (StatusRuntimeException e) {
          throw MemorydException.of(e);
        }
      }

      @Override
      public Memory next() {
        if (!hasNext()) {
          throw new NoSuchElementException();
        }
        return inner.next();
      }
    };
  }

  /**
   * Streams memories (e.g. from {@link #export}) into the daemon under {@code agentId}; it
   * re-embeds them. Refused memories are reported in the response; the others are imported.
   * The whole call has the client's deadline.
   */
  public ImportResponse importMemories(String agentId, Iterable<Memory> memories) {
    CompletableFuture<ImportResponse> result = new CompletableFuture<>();
    StreamObserver<ImportRequest> requests =
        pick(agentId)
            .memoryAsync()
            .withDeadlineAfter(timeout.toNanos(), TimeUnit.NANOSECONDS)
            .import_(
                new StreamObserver<>() {
                  @Override
                  public void onNext(ImportResponse value) {
                    result.complete(value);
                  }

                  @Override
                  public void onError(Throwable t) {
                    result.completeExceptionally(MemorydException.of(t));
                  }

                  @Override
                  public void onCompleted() {
                    result.completeExceptionally(
                        new MemorydException(Status.Code.INTERNAL, "Import ended without a reply"));
                  }
                });
    for (Memory m : memories) {
      if (result.isDone()) {
        break;
      }
      requests.onNext(ImportRequest.newBuilder().setAgentId(agentId).setMemory(m).build());
    }
    requests.onCompleted();
    try {
      return result.get();
    } catch (ExecutionException e) {
      throw MemorydException.of(e.getCause());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new MemorydException(Status.Code.CANCELLED, "interrupted");
    }
  }

  /**
   * Opens a Stream session (no deadline: it lasts until closed). Over a fleet it goes to agent
   * ""'s daemon; {@link #stream(String)} chooses the agent.
   */
  public Session stream() {
    return stream("");
  }

  /** Opens a Stream session on {@code agentId}'s daemon (the agent whose ops it carries). */
  public Session stream(String agentId) {
    return new Session(pick(agentId).memoryAsync()::stream);
  }

  /** Ends the connections; calls in flight fail with CANCELLED. */
  @Override
  public void close() {
    for (Endpoint e : endpoints) {
      e.channel().shutdownNow();
    }
    for (Endpoint e : endpoints) {
      try {
        e.channel().awaitTermination(5, TimeUnit.SECONDS);
      } catch (InterruptedException x) {
        Thread.currentThread().interrupt();
      }
    }
  }
}
