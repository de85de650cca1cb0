package etcd

import (
	"context"
	"sync"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// restarter restarts the TTL of etcd leases over one long-lived LeaseKeepAlive stream per store.
// clientv3's KeepAliveOnce opens a stream per call, which on a lock cycle's hot path cost as much
// CPU as the grant itself. The server answers a stream's requests in order, so the answers for
// one lease ID are matched to its requests first in, first out.
type restarter struct {
	cli *clientv3.Client

	mu      sync.Mutex
	stream  pb.Lease_LeaseKeepAliveClient
	cancel  context.CancelFunc
	waiting map[int64][]chan error
	closed  bool
	wg      sync.WaitGroup
}

// begin sends one keepalive for id from the caller's goroutine and returns the channel its
// answer arrives on (read it with wait): nil if etcd restarted the lease's TTL,
// rpctypes.ErrLeaseNotFound if the lease is gone.
func (r *restarter) begin(id clientv3.LeaseID) <-chan error {
	ch := make(chan error, 1)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		ch <- context.Canceled
		return ch
	}
	if r.stream == nil {
		sctx, cancel := context.WithCancel(clientv3.WithRequireLeader(context.Background()))
		stream, err := pb.NewLeaseClient(r.cli.ActiveConnection()).LeaseKeepAlive(sctx)
		if err != nil {
			cancel()
			ch <- err
			return ch
		}
		r.stream, r.cancel = stream, cancel
		r.wg.Add(1)
		go r.receive(stream)
	}
	if r.waiting == nil {
		r.waiting = map[int64][]chan error{}
	}
	r.waiting[int64(id)] = append(r.waiting[int64(id)], ch)
	if err := r.stream.Send(&pb.LeaseKeepAliveRequest{ID: int64(id)}); err != nil {
		r.reset(r.stream, err) // fails ch too
	}
	return ch
}

// wait returns begin's answer, or ctx's error if ctx ends first (the request stays queued, so
// that later answers still match their requests).
func (r *restarter) wait(ctx context.Context, answer <-chan error) error {
	select {
	case err := <-answer:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (r *restarter) receive(stream pb.Lease_LeaseKeepAliveClient) {
	defer r.wg.Done()
	for {
		resp, err := stream.Recv()
		r.mu.Lock()
		if err != nil {
			r.reset(stream, err)
			r.mu.Unlock()
			return
		}
		if q := r.waiting[resp.ID]; len(q) > 0 {
			var answer error
			if resp.TTL <= 0 {
				answer = rpctypes.ErrLeaseNotFound
			}
			q[0] <- answer
			if len(q) == 1 {
				delete(r.waiting, resp.ID)
			} else {
				r.waiting[resp.ID] = q[1:]
			}
		}
		r.mu.Unlock()
	}
}

// reset drops stream, if it is the current one, and fails every request waiting on it. r.mu is
// held.
func (r *restarter) reset(stream pb.Lease_LeaseKeepAliveClient, err error) {
	if r.stream != stream {
		return
	}
	r.cancel()
	r.stream, r.cancel = nil, nil
	for id, q := range r.waiting {
		for _, ch := range q {
			ch <- err
		}
		delete(r.waiting, id)
	}
}

// close ends the stream and waits for its receiver.
func (r *restarter) close() {
	r.mu.Lock()
	r.closed = true
	if r.stream != nil {
		r.reset(r.stream, context.Canceled)
	}
	r.mu.Unlock()
	r.wg.Wait()
}
