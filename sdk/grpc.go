package sdk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"
	"sync"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/berth-ci/berth/provider"
	pb "github.com/berth-ci/berth/sdk/proto"
)

// GRPCPlugin is the go-plugin glue of protocol version 1: on the plugin side
// it serves Impl, on the host side it returns a client that implements
// InstanceGroup and Suspender and offers Recycle, Watch and RequestedSize. Plugin authors
// need not use it; Serve does.
type GRPCPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	// Impl is the served group; nil on the host side.
	Impl InstanceGroup
}

// GRPCServer registers the instance-group service.
func (p *GRPCPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	pb.RegisterInstanceGroupServer(s, &server{impl: p.Impl, watchers: map[chan *pb.Notification]struct{}{}})
	return nil
}

// GRPCClient returns the host's view of the plugin's group.
func (p *GRPCPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return &Client{rpc: pb.NewInstanceGroupClient(c)}, nil
}

// ErrSuspendUnsupported is returned by Client.Suspend and Client.Resume when
// the plugin's group has no suspend capability.
var ErrSuspendUnsupported = errors.New("the provider plugin does not support suspend/resume")

// ErrRecycleUnsupported is returned by Client.Recycle when the plugin's
// group cannot reset instances between jobs, or the plugin predates Recycle.
var ErrRecycleUnsupported = errors.New("the provider plugin does not support recycling instances between jobs")

// ErrNotifyUnsupported is returned by Client.Watch when the plugin's group
// cannot report state changes, or the plugin predates Watch.
var ErrNotifyUnsupported = errors.New("the provider plugin does not report state changes")

// ErrRequestedSizeUnsupported is returned by Client.RequestedSize when the
// plugin's group keeps no requested size, or the plugin predates the call.
// It wraps provider.ErrRequestedSizeUnknown, so berth asks no more.
var ErrRequestedSizeUnsupported = fmt.Errorf("%w (the provider plugin does not serve RequestedSize)", provider.ErrRequestedSizeUnknown)

// server adapts an InstanceGroup to the gRPC service. A panic in the group
// becomes an error of that call (with the stack in the plugin's log) rather
// than the end of the plugin.
type server struct {
	pb.UnimplementedInstanceGroupServer
	impl InstanceGroup

	// watchers are the open Watch streams, each fed by its channel. The
	// group's single Notify registration (made by the first Watch) fans out
	// to all of them, so a host that re-opens its stream before the old one
	// ended loses nothing.
	mu       sync.Mutex
	watchers map[chan *pb.Notification]struct{}
	register sync.Once
}

func guard(method string, err *error) {
	if r := recover(); r != nil {
		slog.Error("provider panicked", "method", method, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
		*err = status.Errorf(codes.Internal, "%s panicked in the plugin: %v", method, r)
	}
}

func rpcErr(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, provider.ErrTransient) {
		// First: a cloud SDK's error may carry a gRPC status of its own
		// (googleapi's 500 says Internal), which would hide that it is
		// transient, and the host would not retry it (issue 43).
		// Not Unavailable: the host reads that as a broken connection.
		return status.Error(codes.ResourceExhausted, err.Error())
	}
	if errors.Is(err, provider.ErrInstanceGoing) {
		return status.Error(codes.FailedPrecondition, err.Error())
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	}
	return status.Error(codes.Unknown, err.Error())
}

func (s *server) Init(ctx context.Context, r *pb.InitRequest) (_ *pb.InitResponse, err error) {
	defer guard("Init", &err)
	info, err := s.impl.Init(ctx, Settings{Config: r.GetConfigJson(), StateDir: r.GetStateDir(), Private: r.GetPrivate()})
	if err != nil {
		return nil, rpcErr(err)
	}
	_, canSuspend := s.impl.(Suspender)
	_, canNotify := s.impl.(Notifier)
	_, canRecycle := s.impl.(Recycler)
	_, canSize := s.impl.(RequestedSizer)
	return &pb.InitResponse{Id: info.ID, MaxSize: int64(info.MaxSize), Version: info.Version,
		Capabilities: &pb.Capabilities{
			Suspend: info.Capabilities.Suspend && canSuspend,
			Notify:  info.Capabilities.Notify && canNotify,
			Recycle: info.Capabilities.Recycle && canRecycle,
			// A claim about the instances, not a method: nothing to check.
			Disposable:    info.Capabilities.Disposable,
			RequestedSize: info.Capabilities.RequestedSize && canSize,
		}}, nil
}

func (s *server) CheckConfig(_ context.Context, r *pb.CheckConfigRequest) (_ *pb.CheckConfigResponse, err error) {
	defer guard("CheckConfig", &err)
	c, ok := s.impl.(provider.ConfigChecker)
	if !ok {
		return &pb.CheckConfigResponse{Unchecked: true}, nil
	}
	resp := &pb.CheckConfigResponse{}
	for _, ce := range provider.ConfigErrors(c.CheckConfig(r.GetConfigJson())) {
		resp.Problems = append(resp.Problems, &pb.ConfigProblem{Key: ce.Key, Message: ce.Message})
	}
	return resp, nil
}

func (s *server) Update(ctx context.Context, _ *pb.UpdateRequest) (_ *pb.UpdateResponse, err error) {
	defer guard("Update", &err)
	resp := &pb.UpdateResponse{}
	err = s.impl.Update(ctx, func(id string, st State) {
		resp.Instances = append(resp.Instances, &pb.Instance{Id: id, State: string(st)})
	})
	if err != nil {
		return nil, rpcErr(err)
	}
	return resp, nil
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func (s *server) Increase(ctx context.Context, r *pb.IncreaseRequest) (_ *pb.IncreaseResponse, err error) {
	defer guard("Increase", &err)
	n, err := s.impl.Increase(ctx, int(r.GetN()))
	return &pb.IncreaseResponse{Created: int64(n), Error: errString(err)}, nil
}

func (s *server) Decrease(ctx context.Context, r *pb.IDsRequest) (_ *pb.IDsResponse, err error) {
	defer guard("Decrease", &err)
	acc, err := s.impl.Decrease(ctx, r.GetIds())
	return &pb.IDsResponse{Accepted: acc, Error: errString(err)}, nil
}

func (s *server) ConnectInfo(ctx context.Context, r *pb.InstanceRequest) (_ *pb.ConnectInfoResponse, err error) {
	defer guard("ConnectInfo", &err)
	ci, err := s.impl.ConnectInfo(ctx, r.GetId())
	if err != nil {
		return nil, rpcErr(err)
	}
	return &pb.ConnectInfoResponse{Id: ci.ID, Addr: ci.Addr, Username: ci.Username, HostKey: ci.HostKey,
		PrivateKey: ci.PrivateKey, Os: ci.OS, Arch: ci.Arch}, nil
}

func (s *server) Heartbeat(ctx context.Context, r *pb.InstanceRequest) (_ *pb.Empty, err error) {
	defer guard("Heartbeat", &err)
	if err := s.impl.Heartbeat(ctx, r.GetId()); err != nil {
		return nil, rpcErr(err)
	}
	return &pb.Empty{}, nil
}

func (s *server) suspendResume(ctx context.Context, r *pb.IDsRequest, suspend bool) (_ *pb.IDsResponse, err error) {
	sus, ok := s.impl.(Suspender)
	if !ok {
		return nil, status.Error(codes.Unimplemented, ErrSuspendUnsupported.Error())
	}
	var acc []string
	if suspend {
		defer guard("Suspend", &err)
		acc, err = sus.Suspend(ctx, r.GetIds())
	} else {
		defer guard("Resume", &err)
		acc, err = sus.Resume(ctx, r.GetIds())
	}
	return &pb.IDsResponse{Accepted: acc, Error: errString(err)}, nil
}

func (s *server) Suspend(ctx context.Context, r *pb.IDsRequest) (*pb.IDsResponse, error) {
	return s.suspendResume(ctx, r, true)
}

func (s *server) Resume(ctx context.Context, r *pb.IDsRequest) (*pb.IDsResponse, error) {
	return s.suspendResume(ctx, r, false)
}

func (s *server) Recycle(ctx context.Context, r *pb.InstanceRequest) (_ *pb.Empty, err error) {
	rec, ok := s.impl.(Recycler)
	if !ok {
		return nil, status.Error(codes.Unimplemented, ErrRecycleUnsupported.Error())
	}
	defer guard("Recycle", &err)
	if err := rec.Recycle(ctx, r.GetId()); err != nil {
		return nil, rpcErr(err)
	}
	return &pb.Empty{}, nil
}

func (s *server) RequestedSize(ctx context.Context, _ *pb.Empty) (_ *pb.RequestedSizeResponse, err error) {
	rs, ok := s.impl.(RequestedSizer)
	if !ok {
		return nil, status.Error(codes.Unimplemented, ErrRequestedSizeUnsupported.Error())
	}
	defer guard("RequestedSize", &err)
	n, err := rs.RequestedSize(ctx)
	if err != nil {
		return nil, rpcErr(err)
	}
	return &pb.RequestedSizeResponse{Size: int64(n)}, nil
}

// watchBuffer is how many notifications a Watch stream may fall behind
// before further ones are dropped: the group's Notify callback must return
// at once, and a dropped hint costs latency only.
const watchBuffer = 256

// Watch streams the group's notifications until the host ends the stream.
// The group's Notify is called once, with the first stream, and never
// again: calling it while streams come and go would take the group's lock
// while its own notification path may hold it and wait for ours.
func (s *server) Watch(_ *pb.Empty, stream grpc.ServerStreamingServer[pb.Notification]) error {
	n, ok := s.impl.(Notifier)
	if !ok {
		return status.Error(codes.Unimplemented, ErrNotifyUnsupported.Error())
	}
	ch := make(chan *pb.Notification, watchBuffer)
	s.mu.Lock()
	s.watchers[ch] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.watchers, ch)
		s.mu.Unlock()
	}()
	s.register.Do(func() { n.Notify(s.fanOut) })
	for {
		select {
		case <-stream.Context().Done():
			return nil
		case note := <-ch:
			if err := stream.Send(note); err != nil {
				return err
			}
		}
	}
}

// fanOut is the group's notification function: it queues the notification
// on every open stream without waiting, as Notify's contract asks.
func (s *server) fanOut(id string, st State) {
	note := &pb.Notification{Id: id, State: string(st)}
	s.mu.Lock()
	defer s.mu.Unlock()
	for ch := range s.watchers {
		select {
		case ch <- note:
		default:
			slog.Warn("a Watch stream is behind; notification dropped (berth learns it at its next listing)", "id", id, "state", st)
		}
	}
}

func (s *server) Shutdown(ctx context.Context, _ *pb.Empty) (_ *pb.Empty, err error) {
	defer guard("Shutdown", &err)
	if err := s.impl.Shutdown(ctx); err != nil {
		return nil, rpcErr(err)
	}
	return &pb.Empty{}, nil
}

// Client is the host side of a plugin's instance group: it implements
// InstanceGroup and Suspender by calling the plugin. It translates only;
// checking what the plugin answers is the host's business.
type Client struct {
	rpc pb.InstanceGroupClient
}

// callErr turns a gRPC status back into a plain error with the plugin's message.
func callErr(method string, err error) error {
	if err == nil {
		return nil
	}
	if st, ok := status.FromError(err); ok {
		switch st.Code() {
		case codes.Unknown:
			return errors.New(st.Message())
		case codes.Unimplemented:
			switch method {
			case "Suspend", "Resume":
				return ErrSuspendUnsupported
			case "Recycle":
				return ErrRecycleUnsupported
			case "Watch":
				return ErrNotifyUnsupported
			case "RequestedSize":
				return ErrRequestedSizeUnsupported
			}
		case codes.DeadlineExceeded:
			return fmt.Errorf("%s: %w", st.Message(), context.DeadlineExceeded)
		case codes.ResourceExhausted:
			return fmt.Errorf("%s: %w", st.Message(), provider.ErrTransient)
		case codes.FailedPrecondition:
			return fmt.Errorf("%s: %w", st.Message(), provider.ErrInstanceGoing)
		}
	}
	return err
}

func partial(s string) error {
	if s == "" {
		return nil
	}
	return errors.New(s)
}

// Init implements InstanceGroup.
func (c *Client) Init(ctx context.Context, s Settings) (Info, error) {
	r, err := c.rpc.Init(ctx, &pb.InitRequest{ConfigJson: s.Config, StateDir: s.StateDir, Private: s.Private})
	if err != nil {
		return Info{}, callErr("Init", err)
	}
	caps := r.GetCapabilities()
	return Info{ID: r.GetId(), MaxSize: int(r.GetMaxSize()), Version: r.GetVersion(),
		Capabilities: Capabilities{Suspend: caps.GetSuspend(), Notify: caps.GetNotify(), Recycle: caps.GetRecycle(),
			Disposable: caps.GetDisposable(), RequestedSize: caps.GetRequestedSize()}}, nil
}

// ErrCheckUnsupported is returned by Client.CheckConfig when the plugin
// cannot check a provider_config before Init: it predates CheckConfig, or
// its group has no check of its own.
var ErrCheckUnsupported = errors.New("the provider plugin cannot check its provider_config before it starts")

// CheckConfig asks the plugin to check a provider_config without side
// effects. The error is nil when the plugin accepts it, ErrCheckUnsupported
// when it cannot tell, else the *provider.ConfigError values joined.
func (c *Client) CheckConfig(ctx context.Context, raw []byte) error {
	r, err := c.rpc.CheckConfig(ctx, &pb.CheckConfigRequest{ConfigJson: raw})
	if st, ok := status.FromError(err); ok && st.Code() == codes.Unimplemented {
		return ErrCheckUnsupported
	}
	if err != nil {
		return callErr("CheckConfig", err)
	}
	if r.GetUnchecked() {
		return ErrCheckUnsupported
	}
	var errs []error
	for _, p := range r.GetProblems() {
		errs = append(errs, &provider.ConfigError{Key: p.GetKey(), Message: p.GetMessage()})
	}
	return errors.Join(errs...)
}

// Update implements InstanceGroup.
func (c *Client) Update(ctx context.Context, fn func(id string, s State)) error {
	r, err := c.rpc.Update(ctx, &pb.UpdateRequest{})
	if err != nil {
		return callErr("Update", err)
	}
	for _, in := range r.GetInstances() {
		fn(in.GetId(), State(in.GetState()))
	}
	return nil
}

// Increase implements InstanceGroup.
func (c *Client) Increase(ctx context.Context, n int) (int, error) {
	r, err := c.rpc.Increase(ctx, &pb.IncreaseRequest{N: int64(n)})
	if err != nil {
		return 0, callErr("Increase", err)
	}
	return int(r.GetCreated()), partial(r.GetError())
}

// Decrease implements InstanceGroup.
func (c *Client) Decrease(ctx context.Context, ids []string) ([]string, error) {
	r, err := c.rpc.Decrease(ctx, &pb.IDsRequest{Ids: ids})
	if err != nil {
		return nil, callErr("Decrease", err)
	}
	return r.GetAccepted(), partial(r.GetError())
}

// ConnectInfo implements InstanceGroup.
func (c *Client) ConnectInfo(ctx context.Context, id string) (ConnectInfo, error) {
	r, err := c.rpc.ConnectInfo(ctx, &pb.InstanceRequest{Id: id})
	if err != nil {
		return ConnectInfo{}, callErr("ConnectInfo", err)
	}
	return ConnectInfo{ID: r.GetId(), Addr: r.GetAddr(), Username: r.GetUsername(), HostKey: r.GetHostKey(),
		PrivateKey: r.GetPrivateKey(), OS: r.GetOs(), Arch: r.GetArch()}, nil
}

// Heartbeat implements InstanceGroup.
func (c *Client) Heartbeat(ctx context.Context, id string) error {
	_, err := c.rpc.Heartbeat(ctx, &pb.InstanceRequest{Id: id})
	return callErr("Heartbeat", err)
}

// Suspend implements Suspender.
func (c *Client) Suspend(ctx context.Context, ids []string) ([]string, error) {
	r, err := c.rpc.Suspend(ctx, &pb.IDsRequest{Ids: ids})
	if err != nil {
		return nil, callErr("Suspend", err)
	}
	return r.GetAccepted(), partial(r.GetError())
}

// Resume implements Suspender.
func (c *Client) Resume(ctx context.Context, ids []string) ([]string, error) {
	r, err := c.rpc.Resume(ctx, &pb.IDsRequest{Ids: ids})
	if err != nil {
		return nil, callErr("Resume", err)
	}
	return r.GetAccepted(), partial(r.GetError())
}

// Recycle resets instance id between two jobs (see provider.Recycler). It
// returns ErrRecycleUnsupported when the plugin cannot.
func (c *Client) Recycle(ctx context.Context, id string) error {
	_, err := c.rpc.Recycle(ctx, &pb.InstanceRequest{Id: id})
	return callErr("Recycle", err)
}

// RequestedSize asks the plugin how many instances its group was asked for
// (see provider.RequestedSizer). It returns ErrRequestedSizeUnsupported
// when the plugin cannot say: its group keeps no such number, or the
// plugin predates the call and answers UNIMPLEMENTED.
func (c *Client) RequestedSize(ctx context.Context) (int, error) {
	r, err := c.rpc.RequestedSize(ctx, &pb.Empty{})
	if err != nil {
		return 0, callErr("RequestedSize", err)
	}
	return int(r.GetSize()), nil
}

// Watch opens the plugin's notification stream and calls fn for each
// notification until ctx is done or the stream breaks; it returns nil when
// ctx ended it, ErrNotifyUnsupported when the plugin cannot notify, and
// otherwise why the stream ended. fn is called from Watch's goroutine.
func (c *Client) Watch(ctx context.Context, fn func(id string, s State)) error {
	stream, err := c.rpc.Watch(ctx, &pb.Empty{})
	if err != nil {
		return c.watchEnd(ctx, err)
	}
	for {
		note, err := stream.Recv()
		if err != nil {
			return c.watchEnd(ctx, err)
		}
		fn(note.GetId(), State(note.GetState()))
	}
}

func (c *Client) watchEnd(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	if errors.Is(err, io.EOF) {
		return errors.New("the plugin ended its notification stream")
	}
	return callErr("Watch", err)
}

// Shutdown implements InstanceGroup.
func (c *Client) Shutdown(ctx context.Context) error {
	_, err := c.rpc.Shutdown(ctx, &pb.Empty{})
	return callErr("Shutdown", err)
}
