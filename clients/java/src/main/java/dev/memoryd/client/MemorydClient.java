package dev.memoryd.client;

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
import dev.memoryd.v1.RecallRequest;
import dev.memoryd.v1.RecallResponse;
import dev.memoryd.v1.StatsRequest;
import dev.memoryd.v1.StatsResponse;
import dev.memoryd.v1.StoreRequest;
import dev.memoryd.v1.StoreResponse;
import dev.memoryd.v1.UpdateRequest;
import dev.memoryd.v1.UpdateResponse;
import io.grpc.ChannelCredentials;
import io.grpc.ClientInterceptor;
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
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.function.BiFunction;

/**
 * The memoryd client: one object for MemoryService and HookService over one connection.
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
 */
public final class MemorydClient implements AutoCloseable {
  public static final String DEFAULT_ADDRESS = "127.0.0.1:50051";

  private final ManagedChannel channel;
  private final MemoryServiceGrpc.MemoryServiceBlockingStub memory;
  private final MemoryServiceGrpc.MemoryServiceStub memoryAsync;
  private final HookServiceGrpc.HookServiceBlockingStub hooks;
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
    var builder = Grpc.newChannelBuilder(b.address, creds);
    if (b.authority != null) {
      builder.overrideAuthority(b.authority);
    }
    List<ClientInterceptor> interceptors = new ArrayList<>();
    if (b.token != null && !b.token.isEmpty()) {
      Metadata headers = new Metadata();
      headers.put(
          Metadata.Key.of("authorization", Metadata.ASCII_STRING_MARSHALLER), "Bearer " + b.token);
      interceptors.add(MetadataUtils.newAttachHeadersInterceptor(headers));
    }
    builder.intercept(interceptors);
    this.channel = builder.build();
    this.memory = MemoryServiceGrpc.newBlockingStub(channel);
    this.memoryAsync = MemoryServiceGrpc.newStub(channel);
    this.hooks = HookServiceGrpc.newBlockingStub(channel);
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
      }
    }
  }

  /**
   * One unary call under the client's deadline; idempotent calls are retried on UNAVAILABLE
   * with exponential backoff (100 ms doubled up to maxBackoff; each wait between half and all
   * of it, so clients do not return in lockstep) while the deadline allows.
   */
  private <S extends AbstractStub<S>, Req, Resp> Resp call(
      S stub, boolean idempotent, Req request, BiFunction<S, Req, Resp> rpc) {
    long deadline = System.nanoTime() + timeout.toNanos();
    int attempts = 1 + (idempotent ? retries : 0);
    long backoffMs = 100;
    for (int attempt = 1; ; attempt++) {
      long left = deadline - System.nanoTime();
      try {
        return rpc.apply(stub.withDeadlineAfter(Math.max(left, 0), TimeUnit.NANOSECONDS), request);
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

  /** Stores a memory. Retried only with an idempotency key (a retry cannot store twice). */
  public StoreResponse store(StoreRequest request) {
    return call(memory, !request.getIdempotencyKey().isEmpty(), request, (s, r) -> s.store(r));
  }

  /** The memories most relevant to a query, best first. */
  public RecallResponse recall(RecallRequest request) {
    return call(memory, true, request, (s, r) -> s.recall(r));
  }

  /** Deletes by id, or by query when exactly one match is strong. */
  public ForgetResponse forget(ForgetRequest request) {
    return call(memory, false, request, (s, r) -> s.forget(r));
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
    return call(memory, false, request, (s, r) -> s.update(r));
  }

  /** One memory. */
  public Memory get(String agentId, String id) {
    GetRequest request = GetRequest.newBuilder().setAgentId(agentId).setId(id).build();
    return call(memory, true, request, (s, r) -> s.get(r)).getMemory();
  }

  /** One page of memories, newest first unless oldest_first. */
  public ListResponse list(ListRequest request) {
    return call(memory, true, request, (s, r) -> s.list(r));
  }

  /** Counts of what an agent may read. */
  public StatsResponse stats(String agentId) {
    StatsRequest request = StatsRequest.newBuilder().setAgentId(agentId).build();
    return call(memory, true, request, (s, r) -> s.stats(r));
  }

  /** The conflict log entries the agent may read. */
  public ListConflictsResponse listConflicts(ListConflictsRequest request) {
    return call(memory, true, request, (s, r) -> s.listConflicts(r));
  }

  /** The before-prompt hook. Hooks have budgets of their own: never retried. */
  public BuildContextResponse buildContext(BuildContextRequest request) {
    return call(hooks, false, request, (s, r) -> s.buildContext(r));
  }

  /** The after-turn hook. Never retried. */
  public CaptureResponse capture(CaptureRequest request) {
    return call(hooks, false, request, (s, r) -> s.capture(r));
  }

  /**
   * Every memory the agent may read, streamed (no row cap and no deadline). The iterator
   * throws {@link MemorydException} on failure.
   */
  public Iterator<Memory> export(ExportRequest request) {
    Iterator<Memory> inner;
    try {
      inner = memory.export(request);
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
        memoryAsync
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

  /** Opens a Stream session (no deadline: it lasts until closed). */
  public Session stream() {
    return new Session(memoryAsync::stream);
  }

  /** Ends the connection; calls in flight fail with CANCELLED. */
  @Override
  public void close() {
    channel.shutdownNow();
    try {
      channel.awaitTermination(5, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
