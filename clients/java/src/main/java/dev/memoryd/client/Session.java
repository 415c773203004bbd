package dev.memoryd.client;

import dev.memoryd.v1.StreamRequest;
import dev.memoryd.v1.StreamResponse;
import io.grpc.stub.ClientCallStreamObserver;
import io.grpc.stub.ClientResponseObserver;
import io.grpc.stub.StreamObserver;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.function.Function;

/**
 * One Stream session: {@link #send} ops, {@link #recv} answers (matched by request_id, in
 * completion order) until it returns null. A failing op is answered with an {@code error}
 * result; the session goes on. Close it to end the session at once.
 */
public final class Session implements AutoCloseable {
  private static final Object END = new Object();

  private final BlockingQueue<Object> answers = new LinkedBlockingQueue<>();
  private final StreamObserver<StreamRequest> requests;
  private volatile ClientCallStreamObserver<StreamRequest> call;
  private boolean ended;

  Session(Function<StreamObserver<StreamResponse>, StreamObserver<StreamRequest>> open) {
    this.requests =
        open.apply(
            new ClientResponseObserver<StreamRequest, StreamResponse>() {
              @Override
              public void beforeStart(ClientCallStreamObserver<StreamRequest> requestStream) {
                call = requestStream;
              }

              @Override
              public void onNext(StreamResponse value) {
                answers.add(value);
              }

              @Override
              public void onError(Throwable t) {
                answers.add(MemorydException.of(t));
              }

              @Override
              public void onCompleted() {
                answers.add(END);
              }
            });
  }

  /** Sends one op. */
  public synchronized void send(StreamRequest op) {
    requests.onNext(op);
  }

  /** No more ops: {@link #recv} returns null after the last answer. */
  public synchronized void closeSend() {
    requests.onCompleted();
  }

  /**
   * The next answer; null once the session is over.
   *
   * @throws MemorydException if the session failed (e.g. UNAUTHENTICATED)
   */
  public StreamResponse recv() throws InterruptedException {
    if (ended) {
      return null;
    }
    Object next = answers.take();
    if (next == END) {
      ended = true;
      return null;
    }
    if (next instanceof MemorydException e) {
      ended = true;
      throw e;
    }
    return (StreamResponse) next;
  }

  @Override
  public void close() {
    ClientCallStreamObserver<StreamRequest> c = call;
    if (c != null && !ended) {
      c.cancel("session closed", null);
    }
  }
}
