package dev.memoryd.v1;

import static io.grpc.MethodDescriptor.generateFullMethodName;

/**
 */
@io.grpc.stub.annotations.GrpcGenerated
public final class HookServiceGrpc {

  private HookServiceGrpc() {}

  public static final java.lang.String SERVICE_NAME = "memoryd.v1.HookService";

  // Static method descriptors that strictly reflect the proto.
  private static volatile io.grpc.MethodDescriptor<dev.memoryd.v1.BuildContextRequest,
      dev.memoryd.v1.BuildContextResponse> getBuildContextMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "BuildContext",
      requestType = dev.memoryd.v1.BuildContextRequest.class,
      responseType = dev.memoryd.v1.BuildContextResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.memoryd.v1.BuildContextRequest,
      dev.memoryd.v1.BuildContextResponse> getBuildContextMethod() {
    io.grpc.MethodDescriptor<dev.memoryd.v1.BuildContextRequest, dev.memoryd.v1.BuildContextResponse> getBuildContextMethod;
    if ((getBuildContextMethod = HookServiceGrpc.getBuildContextMethod) == null) {
      synchronized (HookServiceGrpc.class) {
        if ((getBuildContextMethod = HookServiceGrpc.getBuildContextMethod) == null) {
          HookServiceGrpc.getBuildContextMethod = getBuildContextMethod =
              io.grpc.MethodDescriptor.<dev.memoryd.v1.BuildContextRequest, dev.memoryd.v1.BuildContextResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "BuildContext"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.memoryd.v1.BuildContextRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.memoryd.v1.BuildContextResponse.getDefaultInstance()))
              .setSchemaDescriptor(new HookServiceMethodDescriptorSupplier("BuildContext"))
              .build();
        }
      }
    }
    return getBuildContextMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.memoryd.v1.CaptureRequest,
      dev.memoryd.v1.CaptureResponse> getCaptureMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "Capture",
      requestType = dev.memoryd.v1.CaptureRequest.class,
      responseType = dev.memoryd.v1.CaptureResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.memoryd.v1.CaptureRequest,
      dev.memoryd.v1.CaptureResponse> getCaptureMethod() {
    io.grpc.MethodDescriptor<dev.memoryd.v1.CaptureRequest, dev.memoryd.v1.CaptureResponse> getCaptureMethod;
    if ((getCaptureMethod = HookServiceGrpc.getCaptureMethod) == null) {
      synchronized (HookServiceGrpc.class) {
        if ((getCaptureMethod = HookServiceGrpc.getCaptureMethod) == null) {
          HookServiceGrpc.getCaptureMethod = getCaptureMethod =
              io.grpc.MethodDescriptor.<dev.memoryd.v1.CaptureRequest, dev.memoryd.v1.CaptureResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "Capture"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.memoryd.v1.CaptureRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.memoryd.v1.CaptureResponse.getDefaultInstance()))
              .setSchemaDescriptor(new HookServiceMethodDescriptorSupplier("Capture"))
              .build();
        }
      }
    }
    return getCaptureMethod;
  }

  /**
   * Creates a new async stub that supports all call types for the service
   */
  public static HookServiceStub newStub(io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<HookServiceStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<HookServiceStub>() {
        @java.lang.Override
        public HookServiceStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new HookServiceStub(channel, callOptions);
        }
      };
    return HookServiceStub.newStub(factory, channel);
  }

  /**
   * Creates a new blocking-style stub that supports all types of calls on the service
   */
  public static HookServiceBlockingV2Stub newBlockingV2Stub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<HookServiceBlockingV2Stub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<HookServiceBlockingV2Stub>() {
        @java.lang.Override
        public HookServiceBlockingV2Stub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new HookServiceBlockingV2Stub(channel, callOptions);
        }
      };
    return HookServiceBlockingV2Stub.newStub(factory, channel);
  }

  /**
   * Creates a new blocking-style stub that supports unary and streaming output calls on the service
   */
  public static HookServiceBlockingStub newBlockingStub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<HookServiceBlockingStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<HookServiceBlockingStub>() {
        @java.lang.Override
        public HookServiceBlockingStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new HookServiceBlockingStub(channel, callOptions);
        }
      };
    return HookServiceBlockingStub.newStub(factory, channel);
  }

  /**
   * Creates a new ListenableFuture-style stub that supports unary calls on the service
   */
  public static HookServiceFutureStub newFutureStub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<HookServiceFutureStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<HookServiceFutureStub>() {
        @java.lang.Override
        public HookServiceFutureStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new HookServiceFutureStub(channel, callOptions);
        }
      };
    return HookServiceFutureStub.newStub(factory, channel);
  }

  /**
   */
  public interface AsyncService {

    /**
     * <pre>
     * Before-prompt hook: the recall block for this prompt, within a time budget.
     * </pre>
     */
    default void buildContext(dev.memoryd.v1.BuildContextRequest request,
        io.grpc.stub.StreamObserver<dev.memoryd.v1.BuildContextResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getBuildContextMethod(), responseObserver);
    }

    /**
     * <pre>
     * After-turn hook: store what the user asked to be remembered, and say why for each message.
     * </pre>
     */
    default void capture(dev.memoryd.v1.CaptureRequest request,
        io.grpc.stub.StreamObserver<dev.memoryd.v1.CaptureResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getCaptureMethod(), responseObserver);
    }
  }

  /**
   * Base class for the server implementation of the service HookService.
   */
  public static abstract class HookServiceImplBase
      implements io.grpc.BindableService, AsyncService {

    @java.lang.Override public final io.grpc.ServerServiceDefinition bindService() {
      return HookServiceGrpc.bindService(this);
    }
  }

  /**
   * A stub to allow clients to do asynchronous rpc calls to service HookService.
   */
  public static final class HookServiceStub
      extends io.grpc.stub.AbstractAsyncStub<HookServiceStub> {
    private HookServiceStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected HookServiceStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new HookServiceStub(channel, callOptions);
    }

    /**
     * <pre>
     * Before-prompt hook: the recall block for this prompt, within a time budget.
     * </pre>
     */
    public void buildContext(dev.memoryd.v1.BuildContextRequest request,
        io.grpc.stub.StreamObserver<dev.memoryd.v1.BuildContextResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getBuildContextMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * After-turn hook: store what the user asked to be remembered, and say why for each message.
     * </pre>
     */
    public void capture(dev.memoryd.v1.CaptureRequest request,
        io.grpc.stub.StreamObserver<dev.memoryd.v1.CaptureResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getCaptureMethod(), getCallOptions()), request, responseObserver);
    }
  }

  /**
   * A stub to allow clients to do synchronous rpc calls to service HookService.
   */
  public static final class HookServiceBlockingV2Stub
      extends io.grpc.stub.AbstractBlockingStub<HookServiceBlockingV2Stub> {
    private HookServiceBlockingV2Stub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected HookServiceBlockingV2Stub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new HookServiceBlockingV2Stub(channel, callOptions);
    }

    /**
     * <pre>
     * Before-prompt hook: the recall block for this prompt, within a time budget.
     * </pre>
     */
    public dev.memoryd.v1.BuildContextResponse buildContext(dev.memoryd.v1.BuildContextRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getBuildContextMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * After-turn hook: store what the user asked to be remembered, and say why for each message.
     * </pre>
     */
    public dev.memoryd.v1.CaptureResponse capture(dev.memoryd.v1.CaptureRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getCaptureMethod(), getCallOptions(), request);
    }
  }

  /**
   * A stub to allow clients to do limited synchronous rpc calls to service HookService.
   */
  public static final class HookServiceBlockingStub
      extends io.grpc.stub.AbstractBlockingStub<HookServiceBlockingStub> {
    private HookServiceBlockingStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected HookServiceBlockingStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new HookServiceBlockingStub(channel, callOptions);
    }

    /**
     * <pre>
     * Before-prompt hook: the recall block for this prompt, within a time budget.
     * </pre>
     */
    public dev.memoryd.v1.BuildContextResponse buildContext(dev.memoryd.v1.BuildContextRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getBuildContextMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * After-turn hook: store what the user asked to be remembered, and say why for each message.
     * </pre>
     */
    public dev.memoryd.v1.CaptureResponse capture(dev.memoryd.v1.CaptureRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getCaptureMethod(), getCallOptions(), request);
    }
  }

  /**
   * A stub to allow clients to do ListenableFuture-style rpc calls to service HookService.
   */
  public static final class HookServiceFutureStub
      extends io.grpc.stub.AbstractFutureStub<HookServiceFutureStub> {
    private HookServiceFutureStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected HookServiceFutureStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new HookServiceFutureStub(channel, callOptions);
    }

    /**
     * <pre>
     * Before-prompt hook: the recall block for this prompt, within a time budget.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.memoryd.v1.BuildContextResponse> buildContext(
        dev.memoryd.v1.BuildContextRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getBuildContextMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * After-turn hook: store what the user asked to be remembered, and say why for each message.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.memoryd.v1.CaptureResponse> capture(
        dev.memoryd.v1.CaptureRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getCaptureMethod(), getCallOptions()), request);
    }
  }

  private static final int METHODID_BUILD_CONTEXT = 0;
  private static final int METHODID_CAPTURE = 1;

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
        case METHODID_BUILD_CONTEXT:
          serviceImpl.buildContext((dev.memoryd.v1.BuildContextRequest) request,
              (io.grpc.stub.StreamObserver<dev.memoryd.v1.BuildContextResponse>) responseObserver);
          break;
        case METHODID_CAPTURE:
          serviceImpl.capture((dev.memoryd.v1.CaptureRequest) request,
              (io.grpc.stub.StreamObserver<dev.memoryd.v1.CaptureResponse>) responseObserver);
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
        default:
          throw new AssertionError();
      }
    }
  }

  public static final io.grpc.ServerServiceDefinition bindService(AsyncService service) {
    return io.grpc.ServerServiceDefinition.builder(getServiceDescriptor())
        .addMethod(
          getBuildContextMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.memoryd.v1.BuildContextRequest,
              dev.memoryd.v1.BuildContextResponse>(
                service, METHODID_BUILD_CONTEXT)))
        .addMethod(
          getCaptureMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.memoryd.v1.CaptureRequest,
              dev.memoryd.v1.CaptureResponse>(
                service, METHODID_CAPTURE)))
        .build();
  }

  private static abstract class HookServiceBaseDescriptorSupplier
      implements io.grpc.protobuf.ProtoFileDescriptorSupplier, io.grpc.protobuf.ProtoServiceDescriptorSupplier {
    HookServiceBaseDescriptorSupplier() {}

    @java.lang.Override
    public com.google.protobuf.Descriptors.FileDescriptor getFileDescriptor() {
      return dev.memoryd.v1.Hooks.getDescriptor();
    }

    @java.lang.Override
    public com.google.protobuf.Descriptors.ServiceDescriptor getServiceDescriptor() {
      return getFileDescriptor().findServiceByName("HookService");
    }
  }

  private static final class HookServiceFileDescriptorSupplier
      extends HookServiceBaseDescriptorSupplier {
    HookServiceFileDescriptorSupplier() {}
  }

  private static final class HookServiceMethodDescriptorSupplier
      extends HookServiceBaseDescriptorSupplier
      implements io.grpc.protobuf.ProtoMethodDescriptorSupplier {
    private final java.lang.String methodName;

    HookServiceMethodDescriptorSupplier(java.lang.String methodName) {
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
      synchronized (HookServiceGrpc.class) {
        result = serviceDescriptor;
        if (result == null) {
          serviceDescriptor = result = io.grpc.ServiceDescriptor.newBuilder(SERVICE_NAME)
              .setSchemaDescriptor(new HookServiceFileDescriptorSupplier())
              .addMethod(getBuildContextMethod())
              .addMethod(getCaptureMethod())
              .build();
        }
      }
    }
    return result;
  }
}
