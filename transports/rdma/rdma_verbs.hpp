// Private to transports/rdma (built with libibverbs): the verbs objects
// behind context and queue_pair.
#pragma once

#include <infiniband/verbs.h>

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "transports/rdma/rdma.hpp"

namespace sluice::transport::rdma {

struct context::handles {
  ibv_context* device = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  std::uint8_t port = 1;
  std::uint16_t lid = 0;
  ibv_gid gid{};
  std::vector<ibv_mr*> regions;
  handles() = default;
  handles(const handles&) = delete;
  handles& operator=(const handles&) = delete;
  ~handles();
};

struct queue_pair::handles {
  ibv_qp* qp = nullptr;
  std::uint32_t packet_sequence = 0;
  handles() = default;
  handles(const handles&) = delete;
  handles& operator=(const handles&) = delete;
  ~handles() {
    if (qp != nullptr) ibv_destroy_qp(qp);
  }
};

}  // namespace sluice::transport::rdma
