package dev.memoryd.client;

import io.grpc.Status;
import io.grpc.StatusRuntimeException;

/** A failed call: the gRPC status code and the daemon's message. */
public final class MemorydException extends RuntimeException {
  private final Status.Code code;
  private final String daemonMessage;

  public MemorydException(Status.Code code, String message) {
    super(code.name() + ": " + message);
    this.code = code;
    this.daemonMessage = message;
  }

  static MemorydException of(Throwable error) {
    if (error instanceof MemorydException e) {
      return e;
    }
    Status status = Status.fromThrowable(error);
    String message = status.getDescription();
    if (message == null) {
      message = error instanceof StatusRuntimeException ? "" : String.valueOf(error.getMessage());
    }
    return new MemorydException(status.getCode(), message);
  }

  /** The gRPC status code, e.g. {@code INVALID_ARGUMENT}. */
  public Status.Code code() {
    return code;
  }

  /** The canonical name of the code ("NOT_FOUND"). */
  public String codeName() {
    return code.name();
  }

  /** The daemon's message (what to fix, for INVALID_ARGUMENT). */
  public String daemonMessage() {
    return daemonMessage;
  }
}
