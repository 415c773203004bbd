package dev.memoryd.v1;

import static io.grpc.MethodDescriptor.generateFullMethodName;

/**
 */
@io.grpc.stub.annotations.GrpcGenerated
public final class MemoryServiceGrpc {

  private MemoryServiceGrpc() {}

  public static final java.lang.String SERVICE_NAME = "memoryd.v1.MemoryService";

  // Static method descriptors that strictly reflect the proto.
  private static volatile io.grpc.MethodDescriptor<dev.memoryd.v1.StoreRequest,
      dev.memoryd.v1.StoreResponse> getStoreMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "Store",
      requestType = dev.memoryd.v1.StoreRequest.class,
      responseType = dev.memoryd.v1.StoreResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.memoryd.v1.StoreRequest,
      dev.memoryd.v1.StoreResponse> getStoreMethod() {
    io.grpc.MethodDescriptor<dev.memoryd.v1.StoreRequest, dev.memoryd.v1.StoreResponse> getStoreMethod;
    if ((getStoreMethod = MemoryServiceGrpc.getStoreMethod) == null) {
      synchronized (MemoryServiceGrpc.class) {
        if ((getStoreMethod = MemoryServiceGrpc.getStoreMethod) == null) {
          MemoryServiceGrpc.getStoreMethod = getStoreMethod =
              io.grpc.MethodDescriptor.<dev.memoryd.v1.StoreRequest, dev.memoryd.v1.StoreResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "Store"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.memoryd.v1.StoreRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.memoryd.v1.StoreResponse.getDefaultInstance()))
              .setSchemaDescriptor(new MemoryServiceMethodDescriptorSupplier("Store"))
              .build();
        }
      }
    }
    return getStoreMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.memoryd.v1.RecallRequest,
      dev.memoryd.v1.RecallResponse> getRecallMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "Recall",
      requestType = dev.memoryd.v1.RecallRequest.class,
      responseType = dev.memoryd.v1.RecallResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.memoryd.v1.RecallRequest,
      dev.memoryd.v1.RecallResponse> getRecallMethod() {
    io.grpc.MethodDescriptor<dev.memoryd.v1.RecallRequest, dev.memoryd.v1.RecallResponse> getRecallMethod;
    if ((getRecallMethod = MemoryServiceGrpc.getRecallMethod) == null) {
      synchronized (MemoryServiceGrpc.class) {
        if ((getRecallMethod = MemoryServiceGrpc.getRecallMethod) == null) {
          MemoryServiceGrpc.getRecallMethod = getRecallMethod =
              io.grpc.MethodDescriptor.<dev.memoryd.v1.RecallRequest, dev.memoryd.v1.RecallResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "Recall"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.memoryd.v1.RecallRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.memoryd.v1.RecallResponse.getDefaultInstance()))
              .setSchemaDescriptor(new MemoryServiceMethodDescriptorSupplier("Recall"))
              .build();
        }
      }
    }
    return getRecallMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.memoryd.v1.ForgetRequest,
      dev.memoryd.v1.ForgetResponse> getForgetMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "Forget",
      requestType = dev.memoryd.v1.ForgetRequest.class,
      responseType = dev.memoryd.v1.ForgetResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.memoryd.v1.ForgetRequest,
      dev.memoryd.v1.ForgetResponse> getForgetMethod() {
    io.grpc.MethodDescriptor<dev.memoryd.v1.ForgetRequest, dev.memoryd.v1.ForgetResponse> getForgetMethod;
    if ((getForgetMethod = MemoryServiceGrpc.getForgetMethod) == null) {
      synchronized (MemoryServiceGrpc.class) {
        if ((getForgetMethod = MemoryServiceGrpc.getForgetMethod) == null) {
          MemoryServiceGrpc.getForgetMethod = getForgetMethod =
              io.grpc.MethodDescriptor.<dev.memoryd.v1.ForgetRequest, dev.memoryd.v1.ForgetResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "Forget"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.memoryd.v1.ForgetRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.memoryd.v1.ForgetResponse.getDefaultInstance()))
              .setSchemaDescriptor(new MemoryServiceMethodDescriptorSupplier("Forget"))
              .build();
        }
      }
    }
    return getForgetMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.memoryd.v1.UpdateRequest,
      dev.memoryd.v1.UpdateResponse> getUpdateMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "Update",
      requestType = dev.memoryd.v1.UpdateRequest.class,
      responseType = dev.memoryd.v1.UpdateResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.memoryd.v1.UpdateRequest,
      dev.memoryd.v1.UpdateResponse> getUpdateMethod() {
    io.grpc.MethodDescriptor<dev.memoryd.v1.UpdateRequest, dev.memoryd.v1.UpdateResponse> getUpdateMethod;
    if ((getUpdateMethod = MemoryServiceGrpc.getUpdateMethod) == null) {
      synchronized (MemoryServiceGrpc.class) {
        if ((getUpdateMethod = MemoryServiceGrpc.getUpdateMethod) == null) {
          MemoryServiceGrpc.getUpdateMethod = getUpdateMethod =
              io.grpc.MethodDescriptor.<dev.memoryd.v1.UpdateRequest, dev.memoryd.v1.UpdateResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "Update"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.memoryd.v1.UpdateRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.memoryd.v1.UpdateResponse.getDefaultInstance()))
              .setSchemaDescriptor(new MemoryServiceMethodDescriptorSupplier("Update"))
              .build();
        }
      }
    }
    return getUpdateMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.memoryd.v1.GetRequest,
      dev.memoryd.v1.GetResponse> getGetMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "Get",
      requestType = dev.memoryd.v1.GetRequest.class,
      responseType = dev.memoryd.v1.GetResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.memoryd.v1.GetRequest,
      dev.memoryd.v1.GetResponse> getGetMethod() {
    io.grpc.MethodDescriptor<dev.memoryd.v1.GetRequest, dev.memoryd.v1.GetResponse> getGetMethod;
    if ((getGetMethod = MemoryServiceGrpc.getGetMethod) == null) {
      synchronized (MemoryServiceGrpc.class) {
        if ((getGetMethod = MemoryServiceGrpc.getGetMethod) == null) {
          MemoryServiceGrpc.getGetMethod = getGetMethod =
              io.grpc.MethodDescriptor.<dev.memoryd.v1.GetRequest, dev.memoryd.v1.GetResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "Get"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.memoryd.v1.GetRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.memoryd.v1.GetResponse.getDefaultInstance()))
              .setSchemaDescriptor(new MemoryServiceMethodDescriptorSupplier("Get"))
              .build();
        }
      }
    }
    return getGetMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.memoryd.v1.ListRequest,
      dev.memoryd.v1.ListResponse> getListMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "List",
      requestType = dev.memoryd.v1.ListRequest.class,
      responseType = dev.memoryd.v1.ListResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.memoryd.v1.ListRequest,
      dev.memoryd.v1.ListResponse> getListMethod() {
    io.grpc.MethodDescriptor<dev.memoryd.v1.ListRequest, dev.memoryd.v1.ListResponse> getListMethod;
    if ((getListMethod = MemoryServiceGrpc.getListMethod) == null) {
      synchronized (MemoryServiceGrpc.class) {
        if ((getListMethod = MemoryServiceGrpc.getListMethod) == null) {
          MemoryServiceGrpc.getListMethod = getListMethod =
              io.grpc.MethodDescriptor.<dev.memoryd.v1.ListRequest, dev.memoryd.v1.ListResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "List"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.memoryd.v1.ListRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.memoryd.v1.ListResponse.getDefaultInstance()))
              .setSchemaDescriptor(new MemoryServiceMethodDescriptorSupplier("List"))
              .build();
        }
      }
    }
    return getListMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.memoryd.v1.StatsRequest,
      dev.memoryd.v1.StatsResponse> getStatsMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "Stats",
      requestType = dev.memoryd.v1.StatsRequest.class,
      responseType = dev.memoryd.v1.StatsResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.memoryd.v1.StatsRequest,
      dev.memoryd.v1.StatsResponse> getStatsMethod() {
    io.grpc.MethodDescriptor<dev.memoryd.v1.StatsRequest, dev.memoryd.v1.StatsResponse> getStatsMethod;
    if ((getStatsMethod = MemoryServiceGrpc.getStatsMethod) == null) {
      synchronized (MemoryServiceGrpc.class) {
        if ((getStatsMethod = MemoryServiceGrpc.getStatsMethod) == null) {
          MemoryServiceGrpc.getStatsMethod = getStatsMethod =
              io.grpc.MethodDescriptor.<dev.memoryd.v1.StatsRequest, dev.memoryd.v1.StatsResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "Stats"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.memoryd.v1.StatsRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.memoryd.v1.StatsResponse.getDefaultInstance()))
              .setSchemaDescriptor(new MemoryServiceMethodDescriptorSupplier("Stats"))
              .build();
        }
      }
    }
    return getStatsMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.memoryd.v1.StreamRequest,
      dev.memoryd.v1.StreamResponse> getStreamMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "Stream",
      requestType = dev.memoryd.v1.StreamRequest.class,
      responseType = dev.memoryd.v1.StreamResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.BIDI_STREAMING)
  public static io.grpc.MethodDescriptor<dev.memoryd.v1.StreamRequest,
      dev.memoryd.v1.StreamResponse> getStreamMethod() {
    io.grpc.MethodDescriptor<dev.memoryd.v1.StreamRequest, dev.memoryd.v1.StreamResponse> getStreamMethod;
    if ((getStreamMethod = MemoryServiceGrpc.getStreamMethod) == null) {
      synchronized (MemoryServiceGrpc.class) {
        if ((getStreamMethod = MemoryServiceGrpc.getStreamMethod) == null) {
          MemoryServiceGrpc.getStreamMethod = getStreamMethod =
              io.grpc.MethodDescriptor.<dev.memoryd.v1.StreamRequest, dev.memoryd.v1.StreamResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.BIDI_STREAMING)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "Stream"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.memoryd.v1.StreamRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.memoryd.v1.StreamResponse.getDefaultInstance()))
              .setSchemaDescriptor(new MemoryServiceMethodDescriptorSupplier("Stream"))
              .build();
        }
      }
    }
    return getStreamMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.memoryd.v1.ListConflictsRequest,
      dev.memoryd.v1.ListConflictsResponse> getListConflictsMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "ListConflicts",
      requestType = dev.memoryd.v1.ListConflictsRequest.class,
      responseType = dev.memoryd.v1.ListConflictsResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.memoryd.v1.ListConflictsRequest,
      dev.memoryd.v1.ListConflictsResponse> getListConflictsMethod() {
    io.grpc.MethodDescriptor<dev.memoryd.v1.ListConflictsRequest, dev.memoryd.v1.ListConflictsResponse> getListConflictsMethod;
    if ((getListConflictsMethod = MemoryServiceGrpc.getListConflictsMethod) == null) {
      synchronized (MemoryServiceGrpc.class) {
        if ((getListConflictsMethod = MemoryServiceGrpc.getListConflictsMethod) == null) {
          MemoryServiceGrpc.getListConflictsMethod = getListConflictsMethod =
              io.grpc.MethodDescriptor.<dev.memoryd.v1.ListConflictsRequest, dev.memoryd.v1.ListConflictsResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "ListConflicts"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.memoryd.v1.ListConflictsRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.memoryd.v1.ListConflictsResponse.getDefaultInstance()))
              .setSchemaDescriptor(new MemoryServiceMethodDescriptorSupplier("ListConflicts"))
              .build();
        }
      }
    }
    return getListConflictsMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.memoryd.v1.ExportRequest,
      dev.memoryd.v1.Memory> getExportMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "Export",
      requestType = dev.memoryd.v1.ExportRequest.class,
      responseType = dev.memoryd.v1.Memory.class,
      methodType = io.grpc.MethodDescriptor.MethodType.SERVER_STREAMING)
  public static io.grpc.MethodDescriptor<dev.memoryd.v1.ExportRequest,
      dev.memoryd.v1.Memory> getExportMethod() {
    io.grpc.MethodDescriptor<dev.memoryd.v1.ExportRequest, dev.memoryd.v1.Memory> getExportMethod;
    if ((getExportMethod = MemoryServiceGrpc.getExportMethod) == null) {
      synchronized (MemoryServiceGrpc.class) {
        if ((getExportMethod = MemoryServiceGrpc.getExportMethod) == null) {
          MemoryServiceGrpc.getExportMethod = getExportMethod =
              io.grpc.MethodDescriptor.<dev.memoryd.v1.ExportRequest, dev.memoryd.v1.Memory>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.SERVER_STREAMING)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "Export"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.memoryd.v1.ExportRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.memoryd.v1.Memory.getDefaultInstance()))
              .setSchemaDescriptor(new MemoryServiceMethodDescriptorSupplier("Export"))
              .build();
        }
      }
    }
    return getExportMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.memoryd.v1.ImportRequest,
      dev.memoryd.v1.ImportResponse> getImportMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "Import",
      requestType = dev.memoryd.v1.ImportRequest.class,
      responseType = dev.memoryd.v1.ImportResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.CLIENT_STREAMING)
  public static io.grpc.MethodDescriptor<dev.memoryd.v1.ImportRequest,
      dev.memoryd.v1.ImportResponse> getImportMethod() {
    io.grpc.MethodDescriptor<dev.memoryd.v1.ImportRequest, dev.memoryd.v1.ImportResponse> getImportMethod;
    if ((getImportMethod = MemoryServiceGrpc.getImportMethod) == null) {
      synchronized (MemoryServiceGrpc.class) {
        if ((getImportMethod = MemoryServiceGrpc.getImportMethod) == null) {
          MemoryServiceGrpc.getImportMethod = getImportMethod =
              io.grpc.MethodDescriptor.<dev.memoryd.v1.ImportRequest, dev.memoryd.v1.ImportResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.CLIENT_STREAMING)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "Import"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.memoryd.v1.ImportRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.memoryd.v1.ImportResponse.getDefaultInstance()))
              .setSchemaDescriptor(new MemoryServiceMethodDescriptorSupplier("Import"))
              .build();
        }
      }
    }
    return getImportMethod;
  }

  /**
   * Creates a new async stub that supports all call types for the service
   */
  public static MemoryServiceStub newStub(io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<MemoryServiceStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<MemoryServiceStub>() {
        @java.lang.Override
        public MemoryServiceStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new MemoryServiceStub(channel, callOptions);
        }
      };
    return MemoryServiceStub.newStub(factory, channel);
  }

  /**
   * Creates a new blocking-style stub that supports all types of calls on the service
   */
  public static MemoryServiceBlockingV2Stub newBlockingV2Stub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<MemoryServiceBlockingV2Stub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<MemoryServiceBlockingV2Stub>() {
        @java.lang.Override
        public MemoryServiceBlockingV2Stub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new MemoryServiceBlockingV2Stub(channel, callOptions);
        }
      };
    return MemoryServiceBlockingV2Stub.newStub(factory, channel);
  }

  /**
   * Creates a new blocking-style stub that supports unary and streaming output calls on the service
   */
  public static MemoryServiceBlockingStub newBlockingStub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<MemoryServiceBlockingStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<MemoryServiceBlockingStub>() {
        @java.lang.Override
        public MemoryServiceBlockingStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new MemoryServiceBlockingStub(channel, callOptions);
        }
      };
    return MemoryServiceBlockingStub.newStub(factory, channel);
  }

  /**
   * Creates a new ListenableFuture-style stub that supports unary calls on the service
   */
  public static MemoryServiceFutureStub newFutureStub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<MemoryServiceFutureStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<MemoryServiceFutureStub>() {
        @java.lang.Override
        public MemoryServiceFutureStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new MemoryServiceFutureStub(channel, callOptions);
        }
      };
    return MemoryServiceFutureStub.newStub(factory, channel);
  }

  /**
   */
  public interface AsyncService {

    /**
     */
    default void store(dev.memoryd.v1.StoreRequest request,
        io.grpc.stub.StreamObserver<dev.memoryd.v1.StoreResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getStoreMethod(), responseObserver);
    }

    /**
     */
    default void recall(dev.memoryd.v1.RecallRequest request,
        io.grpc.stub.StreamObserver<dev.memoryd.v1.RecallResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getRecallMethod(), responseObserver);
    }

    /**
     */
    default void forget(dev.memoryd.v1.ForgetRequest request,
        io.grpc.stub.StreamObserver<dev.memoryd.v1.ForgetResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getForgetMethod(), responseObserver);
    }

    /**
     */
    default void update(dev.memoryd.v1.UpdateRequest request,
        io.grpc.stub.StreamObserver<dev.memoryd.v1.UpdateResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getUpdateMethod(), responseObserver);
    }

    /**
     */
    default void get(dev.memoryd.v1.GetRequest request,
        io.grpc.stub.StreamObserver<dev.memoryd.v1.GetResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getGetMethod(), responseObserver);
    }

    /**
     */
    default void list(dev.memoryd.v1.ListRequest request,
        io.grpc.stub.StreamObserver<dev.memoryd.v1.ListResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getListMethod(), responseObserver);
    }

    /**
     */
    default void stats(dev.memoryd.v1.StatsRequest request,
        io.grpc.stub.StreamObserver<dev.memoryd.v1.StatsResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getStatsMethod(), responseObserver);
    }

    /**
     * <pre>
     * One long-lived session: ops run concurrently, each answered by request_id;
     * one failing op never ends the stream.
     * </pre>
     */
    default io.grpc.stub.StreamObserver<dev.memoryd.v1.StreamRequest> stream(
        io.grpc.stub.StreamObserver<dev.memoryd.v1.StreamResponse> responseObserver) {
      return io.grpc.stub.ServerCalls.asyncUnimplementedStreamingCall(getStreamMethod(), responseObserver);
    }

    /**
     * <pre>
     * The conflict log: decisions that clash with another agent's decisions.
     * </pre>
     */
    default void listConflicts(dev.memoryd.v1.ListConflictsRequest request,
        io.grpc.stub.StreamObserver<dev.memoryd.v1.ListConflictsResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getListConflictsMethod(), responseObserver);
    }

    /**
     * <pre>
     * Every memory the agent may read, one message each (no row cap).
     * </pre>
     */
    default void export(dev.memoryd.v1.ExportRequest request,
        io.grpc.stub.StreamObserver<dev.memoryd.v1.Memory> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getExportMethod(), responseObserver);
    }

    /**
     * <pre>
     * Memories from an Export (or a JSONL file of them), re-embedded with this daemon's model.
     * </pre>
     */
    default io.grpc.stub.StreamObserver<dev.memoryd.v1.ImportRequest> import_(
        io.grpc.stub.StreamObserver<dev.memoryd.v1.ImportResponse> responseObserver) {
      return io.grpc.stub.ServerCalls.asyncUnimplementedStreamingCall(getImportMethod(), responseObserver);
    }
  }

  /**
   * Base class for the server implementation of the service MemoryService.
   */
  public static abstract class MemoryServiceImplBase
      implements io.grpc.BindableService, AsyncService {

    @java.lang.Override public final io.grpc.ServerServiceDefinition bindService() {
      return MemoryServiceGrpc.bindService(this);
    }
  }

  /**
   * A stub to allow clients to do asynchronous rpc calls to service MemoryService.
   */
  public static final class MemoryServiceStub
      extends io.grpc.stub.AbstractAsyncStub<MemoryServiceStub> {
    private MemoryServiceStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected MemoryServiceStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new MemoryServiceStub(channel, callOptions);
    }

    /**
     */
    public void store(dev.memoryd.v1.StoreRequest request,
        io.grpc.stub.StreamObserver<dev.memoryd.v1.StoreResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getStoreMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     */
    public void recall(dev.memoryd.v1.RecallRequest request,
        io.grpc.stub.StreamObserver<dev.memoryd.v1.RecallResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getRecallMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     */
    public void forget(dev.memoryd.v1.ForgetRequest request,
        io.grpc.stub.StreamObserver<dev.memoryd.v1.ForgetResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getForgetMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     */
    public void update(dev.memoryd.v1.UpdateRequest request,
        io.grpc.stub.StreamObserver<dev.memoryd.v1.UpdateResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getUpdateMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     */
    public void get(dev.memoryd.v1.GetRequest request,
        io.grpc.stub.StreamObserver<dev.memoryd.v1.GetResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getGetMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     */
    public void list(dev.memoryd.v1.ListRequest request,
        io.grpc.stub.StreamObserver<dev.memoryd.v1.ListResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getListMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     */
    public void stats(dev.memoryd.v1.StatsRequest request,
        io.grpc.stub.StreamObserver<dev.memoryd.v1.StatsResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getStatsMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * One long-lived session: ops run concurrently, each answered by request_id;
     * one failing op never ends the stream.
     * </pre>
     */
    public io.grpc.stub.StreamObserver<dev.memoryd.v1.StreamRequest> stream(
        io.grpc.stub.StreamObserver<dev.memoryd.v1.StreamResponse> responseObserver) {
      return io.grpc.stub.ClientCalls.asyncBidiStreamingCall(
          getChannel().newCall(getStreamMethod(), getCallOptions()), responseObserver);
    }

    /**
     * <pre>
     * The conflict log: decisions that clash with another agent's decisions.
     * </pre>
     */
    public void listConflicts(dev.memoryd.v1.ListConflictsRequest request,
        io.grpc.stub.StreamObserver<dev.memoryd.v1.ListConflictsResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getListConflictsMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Every memory the agent may read, one message each (no row cap).
     * </pre>
     */
    public void export(dev.memoryd.v1.ExportRequest request,
        io.grpc.stub.StreamObserver<dev.memoryd.v1.Memory> responseObserver) {
      io.grpc.stub.ClientCalls.asyncServerStreamingCall(
          getChannel().newCall(getExportMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Memories from an Export (or a JSONL file of them), re-embedded with this daemon's model.
     * </pre>
     */
    public io.grpc.stub.StreamObserver<dev.memoryd.v1.ImportRequest> import_(
        io.grpc.stub.StreamObserver<dev.memoryd.v1.ImportResponse> responseObserver) {
      return io.grpc.stub.ClientCalls.asyncClientStreamingCall(
          getChannel().newCall(getImportMethod(), getCallOptions()), responseObserver);
    }
  }

  /**
   * A stub to allow clients to do synchronous rpc calls to service MemoryService.
   */
  public static final class MemoryServiceBlockingV2Stub
      extends io.grpc.stub.AbstractBlockingStub<MemoryServiceBlockingV2Stub> {
    private MemoryServiceBlockingV2Stub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected MemoryServiceBlockingV2Stub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new MemoryServiceBlockingV2Stub(channel, callOptions);
    }

    /**
     */
    public dev.memoryd.v1.StoreResponse store(dev.memoryd.v1.StoreRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getStoreMethod(), getCallOptions(), request);
    }

    /**
     */
    public dev.memoryd.v1.RecallResponse recall(dev.memoryd.v1.RecallRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getRecallMethod(), getCallOptions(), request);
    }

    /**
     */
    public dev.memoryd.v1.ForgetResponse forget(dev.memoryd.v1.ForgetRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getForgetMethod(), getCallOptions(), request);
    }

    /**
     */
    public dev.memoryd.v1.UpdateResponse update(dev.memoryd.v1.UpdateRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getUpdateMethod(), getCallOptions(), request);
    }

    /**
     */
    public dev.memoryd.v1.GetResponse get(dev.memoryd.v1.GetRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getGetMethod(), getCallOptions(), request);
    }

    /**
     */
    public dev.memoryd.v1.ListResponse list(dev.memoryd.v1.ListRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getListMethod(), getCallOptions(), request);
    }

    /**
     */
    public dev.memoryd.v1.StatsResponse stats(dev.memoryd.v1.StatsRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getStatsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * One long-lived session: ops run concurrently, each answered by request_id;
     * one failing op never ends the stream.
     * </pre>
     */
    @io.grpc.ExperimentalApi("https://github.com/grpc/grpc-java/issues/10918")
    public io.grpc.stub.BlockingClientCall<dev.memoryd.v1.StreamRequest, dev.memoryd.v1.StreamResponse>
        stream() {
      return io.grpc.stub.ClientCalls.blockingBidiStreamingCall(
          getChannel(), getStreamMethod(), getCallOptions());
    }

    /**
     * <pre>
     * The conflict log: decisions that clash with another agent's decisions.
     * </pre>
     */
    public dev.memoryd.v1.ListConflictsResponse listConflicts(dev.memoryd.v1.ListConflictsRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getListConflictsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Every memory the agent may read, one message each (no row cap).
     * </pre>
     */
    @io.grpc.ExperimentalApi("https://github.com/grpc/grpc-java/issues/10918")
    public io.grpc.stub.BlockingClientCall<?, dev.memoryd.v1.Memory>
        export(dev.memoryd.v1.ExportRequest request) {
      return io.grpc.stub.ClientCalls.blockingV2ServerStreamingCall(
          getChannel(), getExportMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Memories from an Export (or a JSONL file of them), re-embedded with this daemon's model.
     * </pre>
     */
    @io.grpc.ExperimentalApi("https://github.com/grpc/grpc-java/issues/10918")
    public io.grpc.stub.BlockingClientCall<dev.memoryd.v1.ImportRequest, dev.memoryd.v1.ImportResponse>
        import_() {
      return io.grpc.stub.ClientCalls.blockingClientStreamingCall(
          getChannel(), getImportMethod(), getCallOptions());
    }
  }

  /**
   * A stub to allow clients to do limited synchronous rpc calls to service MemoryService.
   */
  public static final class MemoryServiceBlockingStub
      extends io.grpc.stub.AbstractBlockingStub<MemoryServiceBlockingStub> {
    private MemoryServiceBlockingStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected MemoryServiceBlockingStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new MemoryServiceBlockingStub(channel, callOptions);
    }

    /**
     */
    public dev.memoryd.v1.StoreResponse store(dev.memoryd.v1.StoreRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getStoreMethod(), getCallOptions(), request);
    }

    /**
     */
    public dev.memoryd.v1.RecallResponse recall(dev.memoryd.v1.RecallRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getRecallMethod(), getCallOptions(), request);
    }

    /**
     */
    public dev.memoryd.v1.ForgetResponse forget(dev.memoryd.v1.ForgetRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getForgetMethod(), getCallOptions(), request);
    }

    /**
     */
    public dev.memoryd.v1.UpdateResponse update(dev.memoryd.v1.UpdateRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getUpdateMethod(), getCallOptions(), request);
    }

    /**
     */
    public dev.memoryd.v1.GetResponse get(dev.memoryd.v1.GetRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getGetMethod(), getCallOptions(), request);
    }

    /**
     */
    public dev.memoryd.v1.ListResponse list(dev.memoryd.v1.ListRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getListMethod(), getCallOptions(), request);
    }

    /**
     */
    public dev.memoryd.v1.StatsResponse stats(dev.memoryd.v1.StatsRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getStatsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * The conflict log: decisions that clash with another agent's decisions.
     * </pre>
     */
    public dev.memoryd.v1.ListConflictsResponse listConflicts(dev.memoryd.v1.ListConflictsRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getListConflictsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Every memory the agent may read, one message each (no row cap).
     * </pre>
     */
    public java.util.Iterator<dev.memoryd.v1.Memory> export(
        dev.memoryd.v1.ExportRequest request) {
      return io.grpc.stub.ClientCalls.blockingServerStreamingCall(
          getChannel(), getExportMethod(), getCallOptions(), request);
    }
  }

  /**
   * A stub to allow clients to do ListenableFuture-style rpc calls to service MemoryService.
   */
  public static final class MemoryServiceFutureStub
      extends io.grpc.stub.AbstractFutureStub<MemoryServiceFutureStub> {
    private MemoryServiceFutureStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected MemoryServiceFutureStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new MemoryServiceFutureStub(channel, callOptions);
    }

    /**
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.memoryd.v1.StoreResponse> store(
        dev.memoryd.v1.StoreRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getStoreMethod(), getCallOptions()), request);
    }

    /**
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.memoryd.v1.RecallResponse> recall(
        dev.memoryd.v1.RecallRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getRecallMethod(), getCallOptions()), request);
    }

    /**
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.memoryd.v1.ForgetResponse> forget(
        dev.memoryd.v1.ForgetRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getForgetMethod(), getCallOptions()), request);
    }

    /**
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.memoryd.v1.UpdateResponse> update(
        dev.memoryd.v1.UpdateRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getUpdateMethod(), getCallOptions()), request);
    }

    /**
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.memoryd.v1.GetResponse> get(
        dev.memoryd.v1.GetRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getGetMethod(), getCallOptions()), request);
    }

    /**
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.memoryd.v1.ListResponse> list(
        dev.memoryd.v1.ListRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getListMethod(), getCallOptions()), request);
    }

    /**
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.memoryd.v1.StatsResponse> stats(
        dev.memoryd.v1.StatsRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getStatsMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * The conflict log: decisions that clash with another agent's decisions.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.memoryd.v1.ListConflictsResponse> listConflicts(
        dev.memoryd.v1.ListConflictsRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getListConflictsMethod(), getCallOptions()), request);
    }
  }

  private static final int METHODID_STORE = 0;
  private static final int METHODID_RECALL = 1;
  private static final int METHODID_FORGET = 2;
  private static final int METHODID_UPDATE = 3;
  private static final int METHODID_GET = 4;
  private static final int METHODID_LIST = 5;
  private static final int METHODID_STATS = 6;
  private static final int METHODID_LIST_CONFLICTS = 7;
  private static final int METHODID_EXPORT = 8;
  private static final int METHODID_STREAM = 9;
  private static final int METHODID_IMPORT = 10;

  private static final class MethodHandlers<Req, Resp> implements
      io.grpc.stub.ServerCalls.UnaryMethod<Req, Resp>,
      io.grpc.stub.ServerCalls.ServerStreamingMethod<Req, Resp>,
      io.grpc.stub.ServerCalls.ClientStreamingMethod<Req, Resp>,
      io.grpc.stub.ServerCalls.BidiStreamingMethod<Req, Resp> {
    private final AsyncService serviceImpl;
    private final int methodId;

    MethodHandlers(AsyncService serviceImpl, int methodId) {
      this.serviceImpl = serviceImpl;
      this.methodId = methodId;
    }

    @java.lang.Override
    @java.lang.SuppressWarnings("unchecked")
    public void invoke(Req request, io.grpc.stub.StreamObserver<Resp> responseObserver) {
      switch (methodId) {
        case METHODID_STORE:
          serviceImpl.store((dev.memoryd.v1.StoreRequest) request,
              (io.grpc.stub.StreamObserver<dev.memoryd.v1.StoreResponse>) responseObserver);
          break;
        case METHODID_RECALL:
          serviceImpl.recall((dev.memoryd.v1.RecallRequest) request,
              (io.grpc.stub.StreamObserver<dev.memoryd.v1.RecallResponse>) responseObserver);
          break;
        case METHODID_FORGET:
          serviceImpl.forget((dev.memoryd.v1.ForgetRequest) request,
              (io.grpc.stub.StreamObserver<dev.memoryd.v1.ForgetResponse>) responseObserver);
          break;
        case METHODID_UPDATE:
          serviceImpl.update((dev.memoryd.v1.UpdateRequest) request,
              (io.grpc.stub.StreamObserver<dev.memoryd.v1.UpdateResponse>) responseObserver);
          break;
        case METHODID_GET:
          serviceImpl.get((dev.memoryd.v1.GetRequest) request,
              (io.grpc.stub.StreamObserver<dev.memoryd.v1.GetResponse>) responseObserver);
          break;
        case METHODID_LIST:
          serviceImpl.list((dev.memoryd.v1.ListRequest) request,
              (io.grpc.stub.StreamObserver<dev.memoryd.v1.ListResponse>) responseObserver);
          break;
        case METHODID_STATS:
          serviceImpl.stats((dev.memoryd.v1.StatsRequest) request,
              (io.grpc.stub.StreamObserver<dev.memoryd.v1.StatsResponse>) responseObserver);
          break;
        case METHODID_LIST_CONFLICTS:
          serviceImpl.listConflicts((dev.memoryd.v1.ListConflictsRequest) request,
              (io.grpc.stub.StreamObserver<dev.memoryd.v1.ListConflictsResponse>) responseObserver);
          break;
        case METHODID_EXPORT:
          serviceImpl.export((dev.memoryd.v1.ExportRequest) request,
              (io.grpc.stub.StreamObserver<dev.memoryd.v1.Memory>) responseObserver);
          break;
        default:
          throw new AssertionError();
      }
    }

    @java.lang.Override
    @java.lang.SuppressWarnings("unchecked")
    public io.grpc.stub.StreamObserver<Req> invoke(
        io.grpc.stub.StreamObserver<Resp> responseObserver) {
      switch (methodId) {
        case METHODID_STREAM:
          return (io.grpc.stub.StreamObserver<Req>) serviceImpl.stream(
              (io.grpc.stub.StreamObserver<dev.memoryd.v1.StreamResponse>) responseObserver);
        case METHODID_IMPORT:
          return (io.grpc.stub.StreamObserver<Req>) serviceImpl.import_(
              (io.grpc.stub.StreamObserver<dev.memoryd.v1.ImportResponse>) responseObserver);
        default:
          throw new AssertionError();
      }
    }
  }

  public static final io.grpc.ServerServiceDefinition bindService(AsyncService service) {
    return io.grpc.ServerServiceDefinition.builder(getServiceDescriptor())
        .addMethod(
          getStoreMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.memoryd.v1.StoreRequest,
              dev.memoryd.v1.StoreResponse>(
                service, METHODID_STORE)))
        .addMethod(
          getRecallMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.memoryd.v1.RecallRequest,
              dev.memoryd.v1.RecallResponse>(
                service, METHODID_RECALL)))
        .addMethod(
          getForgetMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.memoryd.v1.ForgetRequest,
              dev.memoryd.v1.ForgetResponse>(
                service, METHODID_FORGET)))
        .addMethod(
          getUpdateMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.memoryd.v1.UpdateRequest,
              dev.memoryd.v1.UpdateResponse>(
                service, METHODID_UPDATE)))
        .addMethod(
          getGetMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.memoryd.v1.GetRequest,
              dev.memoryd.v1.GetResponse>(
                service, METHODID_GET)))
        .addMethod(
          getListMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.memoryd.v1.ListRequest,
              dev.memoryd.v1.ListResponse>(
                service, METHODID_LIST)))
        .addMethod(
          getStatsMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.memoryd.v1.StatsRequest,
              dev.memoryd.v1.StatsResponse>(
                service, METHODID_STATS)))
        .addMethod(
          getStreamMethod(),
          io.grpc.stub.ServerCalls.asyncBidiStreamingCall(
            new MethodHandlers<
              dev.memoryd.v1.StreamRequest,
              dev.memoryd.v1.StreamResponse>(
                service, METHODID_STREAM)))
        .addMethod(
          getListConflictsMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.memoryd.v1.ListConflictsRequest,
              dev.memoryd.v1.ListConflictsResponse>(
                service, METHODID_LIST_CONFLICTS)))
        .addMethod(
          getExportMethod(),
          io.grpc.stub.ServerCalls.asyncServerStreamingCall(
            new MethodHandlers<
              dev.memoryd.v1.ExportRequest,
              dev.memoryd.v1.Memory>(
                service, METHODID_EXPORT)))
        .addMethod(
          getImportMethod(),
          io.grpc.stub.ServerCalls.asyncClientStreamingCall(
            new MethodHandlers<
              dev.memoryd.v1.ImportRequest,
              dev.memoryd.v1.ImportResponse>(
                service, METHODID_IMPORT)))
        .build();
  }

  private static abstract class MemoryServiceBaseDescriptorSupplier
      implements io.grpc.protobuf.ProtoFileDescriptorSupplier, io.grpc.protobuf.ProtoServiceDescriptorSupplier {
    MemoryServiceBaseDescriptorSupplier() {}

    @java.lang.Override
    public com.google.protobuf.Descriptors.FileDescriptor getFileDescriptor() {
      return dev.memoryd.v1.MemoryOuterClass.getDescriptor();
    }

    @java.lang.Override
    public com.google.protobuf.Descriptors.ServiceDescriptor getServiceDescriptor() {
      return getFileDescriptor().findServiceByName("MemoryService");
    }
  }

  private static final class MemoryServiceFileDescriptorSupplier
      extends MemoryServiceBaseDescriptorSupplier {
    MemoryServiceFileDescriptorSupplier() {}
  }

  private static final class MemoryServiceMethodDescriptorSupplier
      extends MemoryServiceBaseDescriptorSupplier
      implements io.grpc.protobuf.ProtoMethodDescriptorSupplier {
    private final java.lang.String methodName;

    MemoryServiceMethodDescriptorSupplier(java.lang.String methodName) {
      this.methodName = methodName;
    }

    @java.lang.Override
    public com.google.protobuf.Descriptors.MethodDescriptor getMethodDescriptor() {
      return getServiceDescriptor().findMethodByName(methodName);
    }
  }

  private static volatile io.grpc.ServiceDescriptor serviceDescriptor;

  public static io.grpc.ServiceDescriptor getServiceDescriptor() {
    io.grpc.ServiceDescriptor result = serviceDescriptor;
    if (result == null) {
      synchronized (MemoryServiceGrpc.class) {
        result = serviceDescriptor;
        if (result == null) {
          serviceDescriptor = result = io.grpc.ServiceDescriptor.newBuilder(SERVICE_NAME)
              .setSchemaDescriptor(new MemoryServiceFileDescriptorSupplier())
              .addMethod(getStoreMethod())
              .addMethod(getRecallMethod())
              .addMethod(getForgetMethod())
              .addMethod(getUpdateMethod())
              .addMethod(getGetMethod())
              .addMethod(getListMethod())
              .addMethod(getStatsMethod())
              .addMethod(getStreamMethod())
              .addMethod(getListConflictsMethod())
              .addMethod(getExportMethod())
              .addMethod(getImportMethod())
              .build();
        }
      }
    }
    return result;
  }
}
