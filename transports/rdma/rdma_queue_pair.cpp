// Reliable-connected queue pairs: INIT -> RTR -> RTS, and one-sided
// reads and writes posted on them.
#include <cerrno>
#include <cstring>

#include "transports/rdma/rdma_verbs.hpp"

namespace sluice::transport::rdma {
namespace {

// Bounds of one pair's transitions: the usual values for RC over a
// reliable fabric (InfiniBand or lossless RoCE).
constexpr std::uint8_t ack_timeout_exponent = 14;  // 4.096 us * 2^14 ≈ 67 ms per retry
constexpr std::uint8_t retries_max = 7;
constexpr std::uint8_t reads_in_flight_max = 16;

error verbs_error(const char* what, int code) {
  return error{errc::internal, std::string{what} + " failed: " + std::strerror(code)};
}

}  // namespace

queue_pair::queue_pair(context& owner, std::unique_ptr<handles> h) : owner_(owner), handles_(std::move(h)) {}
queue_pair::~queue_pair() = default;

result<std::unique_ptr<queue_pair>> context::create_queue_pair(std::uint32_t outstanding_max) {
  ibv_qp_init_attr init{};
  init.send_cq = handles_->cq;
  init.recv_cq = handles_->cq;
  init.qp_type = IBV_QPT_RC;
  init.sq_sig_all = 1;  // every read and write completes visibly
  init.cap.max_send_wr = outstanding_max;
  init.cap.max_recv_wr = 1;
  init.cap.max_send_sge = 1;
  init.cap.max_recv_sge = 1;
  auto h = std::make_unique<queue_pair::handles>();
  h->qp = ibv_create_qp(handles_->pd, &init);
  if (h->qp == nullptr) return verbs_error("ibv_create_qp", errno);
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_INIT;
  attr.pkey_index = 0;
  attr.port_num = handles_->port;
  attr.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
  int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
  if (int rc = ibv_modify_qp(h->qp, &attr, mask); rc != 0) return verbs_error("ibv_modify_qp to INIT", rc);
  // A packet sequence number derived from the pair's number: distinct per
  // pair, and the peer learns it in the exchange.
  h->packet_sequence = (h->qp->qp_num * 2654435761u) & 0xffffff;
  return std::unique_ptr<queue_pair>{new queue_pair{*this, std::move(h)}};
}

queue_pair_endpoint queue_pair::local() const {
  queue_pair_endpoint e;
  e.qp_number = handles_->qp->qp_num;
  e.packet_sequence = handles_->packet_sequence;
  e.lid = owner_.handles_->lid;
  std::memcpy(e.gid.data(), owner_.handles_->gid.raw, e.gid.size());
  return e;
}

result<void> queue_pair::connect(const queue_pair_endpoint& peer) {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RTR;
  attr.path_mtu = IBV_MTU_1024;
  attr.dest_qp_num = peer.qp_number;
  attr.rq_psn = peer.packet_sequence;
  attr.max_dest_rd_atomic = reads_in_flight_max;
  attr.min_rnr_timer = 12;
  attr.ah_attr.port_num = owner_.handles_->port;
  attr.ah_attr.dlid = peer.lid;
  if (peer.lid == 0) {
    // RoCE: routed by GID.
    attr.ah_attr.is_global = 1;
    std::memcpy(attr.ah_attr.grh.dgid.raw, peer.gid.data(), peer.gid.size());
    attr.ah_attr.grh.hop_limit = 64;
    attr.ah_attr.grh.sgid_index = 0;
  }
  int mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
             IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  if (int rc = ibv_modify_qp(handles_->qp, &attr, mask); rc != 0) return verbs_error("ibv_modify_qp to RTR", rc);
  ibv_qp_attr rts{};
  rts.qp_state = IBV_QPS_RTS;
  rts.timeout = ack_timeout_exponent;
  rts.retry_cnt = retries_max;
  rts.rnr_retry = retries_max;
  rts.sq_psn = handles_->packet_sequence;
  rts.max_rd_atomic = reads_in_flight_max;
  mask = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC;
  if (int rc = ibv_modify_qp(handles_->qp, &rts, mask); rc != 0) return verbs_error("ibv_modify_qp to RTS", rc);
  return {};
}

namespace {

result<void> post(ibv_qp* qp, ibv_wr_opcode op, void* local, std::size_t length, std::uint32_t lkey,
                  std::uint64_t remote_address, std::uint32_t rkey, std::uint64_t work_id) {
  if (length > 0xffffffffu) return fail(errc::invalid_argument, "one RDMA work request moves at most 4 GiB");
  ibv_sge sge{reinterpret_cast<std::uint64_t>(local), static_cast<std::uint32_t>(length), lkey};
  ibv_send_wr wr{};
  wr.wr_id = work_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = op;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = remote_address;
  wr.wr.rdma.rkey = rkey;
  ibv_send_wr* bad = nullptr;
  if (int rc = ibv_post_send(qp, &wr, &bad); rc != 0) {
    return fail(rc == ENOMEM ? errc::overloaded : errc::internal,
                std::string{"ibv_post_send failed: "} + std::strerror(rc));
  }
  return {};
}

}  // namespace

result<void> queue_pair::post_read(std::span<std::byte> into, const memory_key& local_key, std::uint64_t remote_address,
                                   std::uint32_t remote_rkey, std::uint64_t work_id) {
  return post(handles_->qp, IBV_WR_RDMA_READ, into.data(), into.size(), local_key.lkey, remote_address, remote_rkey,
              work_id);
}

result<void> queue_pair::post_write(std::span<const std::byte> from, const memory_key& local_key,
                                    std::uint64_t remote_address, std::uint32_t remote_rkey, std::uint64_t work_id) {
  return post(handles_->qp, IBV_WR_RDMA_WRITE, const_cast<std::byte*>(from.data()), from.size(), local_key.lkey,
              remote_address, remote_rkey, work_id);
}

}  // namespace sluice::transport::rdma
