package dev.memoryd.v1;

import static io.grpc.MethodDescriptor.generateFullMethodName;

/**
 */
@io.grpc.stub.annotations.GrpcGenerated
public final class ReviewServiceGrpc {

  private ReviewServiceGrpc() {}

  public static final java.lang.String SERVICE_NAME = "memoryd.v1.ReviewService";

  // Static method descriptors that strictly reflect the proto.
  private static volatile io.grpc.MethodDescriptor<dev.memoryd.v1.PrepareReviewRequest,
      dev.memoryd.v1.PrepareReviewResponse> getPrepareMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "Prepare",
      requestType = dev.memoryd.v1.PrepareReviewRequest.class,
      responseType = dev.memoryd.v1.PrepareReviewResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.memoryd.v1.PrepareReviewRequest,
      dev.memoryd.v1.PrepareReviewResponse> getPrepareMethod() {
    io.grpc.MethodDescriptor<dev.memoryd.v1.PrepareReviewRequest, dev.memoryd.v1.PrepareReviewResponse> getPrepareMethod;
    if ((getPrepareMethod = ReviewServiceGrpc.getPrepareMethod) == null) {
      synchronized (ReviewServiceGrpc.class) {
        if ((getPrepareMethod = ReviewServiceGrpc.getPrepareMethod) == null) {
          ReviewServiceGrpc.getPrepareMethod = getPrepareMethod =
              io.grpc.MethodDescriptor.<dev.memoryd.v1.PrepareReviewRequest, dev.memoryd.v1.PrepareReviewResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "Prepare"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.memoryd.v1.PrepareReviewRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.memoryd.v1.PrepareReviewResponse.getDefaultInstance()))
              .setSchemaDescriptor(new ReviewServiceMethodDescriptorSupplier("Prepare"))
              .build();
        }
      }
    }
    return getPrepareMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.memoryd.v1.ApplyReviewRequest,
      dev.memoryd.v1.ApplyReviewResponse> getApplyMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "Apply",
      requestType = dev.memoryd.v1.ApplyReviewRequest.class,
      responseType = dev.memoryd.v1.ApplyReviewResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.memoryd.v1.ApplyReviewRequest,
      dev.memoryd.v1.ApplyReviewResponse> getApplyMethod() {
    io.grpc.MethodDescriptor<dev.memoryd.v1.ApplyReviewRequest, dev.memoryd.v1.ApplyReviewResponse> getApplyMethod;
    if ((getApplyMethod = ReviewServiceGrpc.getApplyMethod) == null) {
      synchronized (ReviewServiceGrpc.class) {
        if ((getApplyMethod = ReviewServiceGrpc.getApplyMethod) == null) {
          ReviewServiceGrpc.getApplyMethod = getApplyMethod =
              io.grpc.MethodDescriptor.<dev.memoryd.v1.ApplyReviewRequest, dev.memoryd.v1.ApplyReviewResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "Apply"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.memoryd.v1.ApplyReviewRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.memoryd.v1.ApplyReviewResponse.getDefaultInstance()))
              .setSchemaDescriptor(new ReviewServiceMethodDescriptorSupplier("Apply"))
              .build();
        }
      }
    }
    return getApplyMethod;
  }

  /**
   * Creates a new async stub that supports all call types for the service
   */
  public static ReviewServiceStub newStub(io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<ReviewServiceStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<ReviewServiceStub>() {
        @java.lang.Override
        public ReviewServiceStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new ReviewServiceStub(channel, callOptions);
        }
      };
    return ReviewServiceStub.newStub(factory, channel);
  }

  /**
   * Creates a new blocking-style stub that supports all types of calls on the service
   */
  public static ReviewServiceBlockingV2Stub newBlockingV2Stub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<ReviewServiceBlockingV2Stub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<ReviewServiceBlockingV2Stub>() {
        @java.lang.Override
        public ReviewServiceBlockingV2Stub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new ReviewServiceBlockingV2Stub(channel, callOptions);
        }
      };
    return ReviewServiceBlockingV2Stub.newStub(factory, channel);
  }

  /**
   * Creates a new blocking-style stub that supports unary and streaming output calls on the service
   */
  public static ReviewServiceBlockingStub newBlockingStub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<ReviewServiceBlockingStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<ReviewServiceBlockingStub>() {
        @java.lang.Override
        public ReviewServiceBlockingStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new ReviewServiceBlockingStub(channel, callOptions);
        }
      };
    return ReviewServiceBlockingStub.newStub(factory, channel);
  }

  /**
   * Creates a new ListenableFuture-style stub that supports unary calls on the service
   */
  public static ReviewServiceFutureStub newFutureStub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<ReviewServiceFutureStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<ReviewServiceFutureStub>() {
        @java.lang.Override
        public ReviewServiceFutureStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new ReviewServiceFutureStub(channel, callOptions);
        }
      };
    return ReviewServiceFutureStub.newStub(factory, channel);
  }

  /**
   */
  public interface AsyncService {

    /**
     * <pre>
     * Proposals for one agent over the memories it may read; changes nothing.
     * </pre>
     */
    default void prepare(dev.memoryd.v1.PrepareReviewRequest request,
        io.grpc.stub.StreamObserver<dev.memoryd.v1.PrepareReviewResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getPrepareMethod(), responseObserver);
    }

    /**
     * <pre>
     * Applies approved items, each all-or-nothing after re-validating it. Each item must carry
     * the bundle_id and signature Prepare gave it (review.max_apply_items items at most).
     * </pre>
     */
    default void apply(dev.memoryd.v1.ApplyReviewRequest request,
        io.grpc.stub.StreamObserver<dev.memoryd.v1.ApplyReviewResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getApplyMethod(), responseObserver);
    }
  }

  /**
   * Base class for the server implementation of the service ReviewService.
   */
  public static abstract class ReviewServiceImplBase
      implements io.grpc.BindableService, AsyncService {

    @java.lang.Override public final io.grpc.ServerServiceDefinition bindService() {
      return ReviewServiceGrpc.bindService(this);
    }
  }

  /**
   * A stub to allow clients to do asynchronous rpc calls to service ReviewService.
   */
  public static final class ReviewServiceStub
      extends io.grpc.stub.AbstractAsyncStub<ReviewServiceStub> {
    private ReviewServiceStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected ReviewServiceStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new ReviewServiceStub(channel, callOptions);
    }

    /**
     * <pre>
     * Proposals for one agent over the memories it may read; changes nothing.
     * </pre>
     */
    public void prepare(dev.memoryd.v1.PrepareReviewRequest request,
        io.grpc.stub.StreamObserver<dev.memoryd.v1.PrepareReviewResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getPrepareMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Applies approved items, each all-or-nothing after re-validating it. Each item must carry
     * the bundle_id and signature Prepare gave it (review.max_apply_items items at most).
     * </pre>
     */
    public void apply(dev.memoryd.v1.ApplyReviewRequest request,
        io.grpc.stub.StreamObserver<dev.memoryd.v1.ApplyReviewResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getApplyMethod(), getCallOptions()), request, responseObserver);
    }
  }

  /**
   * A stub to allow clients to do synchronous rpc calls to service ReviewService.
   */
  public static final class ReviewServiceBlockingV2Stub
      extends io.grpc.stub.AbstractBlockingStub<ReviewServiceBlockingV2Stub> {
    private ReviewServiceBlockingV2Stub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected ReviewServiceBlockingV2Stub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new ReviewServiceBlockingV2Stub(channel, callOptions);
    }

    /**
     * <pre>
     * Proposals for one agent over the memories it may read; changes nothing.
     * </pre>
     */
    public dev.memoryd.v1.PrepareReviewResponse prepare(dev.memoryd.v1.PrepareReviewRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getPrepareMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Applies approved items, each all-or-nothing after re-validating it. Each item must carry
     * the bundle_id and signature Prepare gave it (review.max_apply_items items at most).
     * </pre>
     */
    public dev.memoryd.v1.ApplyReviewResponse apply(dev.memoryd.v1.ApplyReviewRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getApplyMethod(), getCallOptions(), request);
    }
  }

  /**
   * A stub to allow clients to do limited synchronous rpc calls to service ReviewService.
   */
  public static final class ReviewServiceBlockingStub
      extends io.grpc.stub.AbstractBlockingStub<ReviewServiceBlockingStub> {
    private ReviewServiceBlockingStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected ReviewServiceBlockingStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new ReviewServiceBlockingStub(channel, callOptions);
    }

    /**
     * <pre>
     * Proposals for one agent over the memories it may read; changes nothing.
     * </pre>
     */
    public dev.memoryd.v1.PrepareReviewResponse prepare(dev.memoryd.v1.PrepareReviewRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getPrepareMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Applies approved items, each all-or-nothing after re-validating it. Each item must carry
     * the bundle_id and signature Prepare gave it (review.max_apply_items items at most).
     * </pre>
     */
    public dev.memoryd.v1.ApplyReviewResponse apply(dev.memoryd.v1.ApplyReviewRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getApplyMethod(), getCallOptions(), request);
    }
  }

  /**
   * A stub to allow clients to do ListenableFuture-style rpc calls to service ReviewService.
   */
  public static final class ReviewServiceFutureStub
      extends io.grpc.stub.AbstractFutureStub<ReviewServiceFutureStub> {
    private ReviewServiceFutureStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected ReviewServiceFutureStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new ReviewServiceFutureStub(channel, callOptions);
    }

    /**
     * <pre>
     * Proposals for one agent over the memories it may read; changes nothing.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.memoryd.v1.PrepareReviewResponse> prepare(
        dev.memoryd.v1.PrepareReviewRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getPrepareMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Applies approved items, each all-or-nothing after re-validating it. Each item must carry
     * the bundle_id and signature Prepare gave it (review.max_apply_items items at most).
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.memoryd.v1.ApplyReviewResponse> apply(
        dev.memoryd.v1.ApplyReviewRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getApplyMethod(), getCallOptions()), request);
    }
  }

  private static final int METHODID_PREPARE = 0;
  private static final int METHODID_APPLY = 1;

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
        case METHODID_PREPARE:
          serviceImpl.prepare((dev.memoryd.v1.PrepareReviewRequest) request,
              (io.grpc.stub.StreamObserver<dev.memoryd.v1.PrepareReviewResponse>) responseObserver);
          break;
        case METHODID_APPLY:
          serviceImpl.apply((dev.memoryd.v1.ApplyReviewRequest) request,
              (io.grpc.stub.StreamObserver<dev.memoryd.v1.ApplyReviewResponse>) responseObserver);
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
          getPrepareMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.memoryd.v1.PrepareReviewRequest,
              dev.memoryd.v1.PrepareReviewResponse>(
                service, METHODID_PREPARE)))
        .addMethod(
          getApplyMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.memoryd.v1.ApplyReviewRequest,
              dev.memoryd.v1.ApplyReviewResponse>(
                service, METHODID_APPLY)))
        .build();
  }

  private static abstract class ReviewServiceBaseDescriptorSupplier
      implements io.grpc.protobuf.ProtoFileDescriptorSupplier, io.grpc.protobuf.ProtoServiceDescriptorSupplier {
    ReviewServiceBaseDescriptorSupplier() {}

    @java.lang.Override
    public com.google.protobuf.Descriptors.FileDescriptor getFileDescriptor() {
      return dev.memoryd.v1.Review.getDescriptor();
    }

    @java.lang.Override
    public com.google.protobuf.Descriptors.ServiceDescriptor getServiceDescriptor() {
      return getFileDescriptor().findServiceByName("ReviewService");
    }
  }

  private static final class ReviewServiceFileDescriptorSupplier
      extends ReviewServiceBaseDescriptorSupplier {
    ReviewServiceFileDescriptorSupplier() {}
  }

  private static final class ReviewServiceMethodDescriptorSupplier
      extends ReviewServiceBaseDescriptorSupplier
      implements io.grpc.protobuf.ProtoMethodDescriptorSupplier {
    private final java.lang.String methodName;

    ReviewServiceMethodDescriptorSupplier(java.lang.String methodName) {
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
      synchronized (ReviewServiceGrpc.class) {
        result = serviceDescriptor;
        if (result == null) {
          serviceDescriptor = result = io.grpc.ServiceDescriptor.newBuilder(SERVICE_NAME)
              .setSchemaDescriptor(new ReviewServiceFileDescriptorSupplier())
              .addMethod(getPrepareMethod())
              .addMethod(getApplyMethod())
              .build();
        }
      }
    }
    return result;
  }
}
