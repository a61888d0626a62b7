# The Sluice wire schema: one envelope with a union of message kinds.
# docs/wire-format.md describes the framing around it.
#
# Rules: field numbers are never reused or renumbered; new fields and new
# union members take the next free number; a removed field stays here,
# renamed obsolete*. Enum values are pinned the same way.

@0xd2c5b0a4e7f01a3b;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("sluice::wire::schema");

struct Envelope {
  requestId @0 :UInt64;    # non-zero: the sender expects one reply
  replyTo @1 :UInt64;      # non-zero: this is the reply to that request id
  source @2 :UInt64;       # node id of the sender
  target @3 :UInt64;       # node id of the addressee; 0 = the link's peer
  deadlineUs @4 :UInt64;   # microseconds left until the deadline when sent; 0 = none
  hops @5 :UInt8;          # forwarding hops taken so far

  body :union {
    hello @6 :Hello;
    error @7 :ErrorReply;
    ok @8 :Void;
    registerOwner @9 :RegisterOwner;
    registerOwnerReply @10 :RegisterOwnerReply;
    heartbeat @11 :Heartbeat;
    heartbeatReply @12 :HeartbeatReply;
    place @13 :Place;
    placeReply @14 :PlaceReply;
    commit @15 :Commit;
    abortPut @16 :KeyVersion;
    locate @17 :Key;
    locateReply @18 :LocateReply;
    removeKey @19 :RemoveKey;
    removeKeyReply @20 :Bool;        # existed
    drop @21 :KeyVersion;
    fetch @22 :KeyVersion;
    fetchReply @23 :UInt64;          # version
    store @24 :Store;
    kvPut @25 :KvPut;
    kvPutReply @26 :UInt64;          # version
    kvGet @27 :Key;
    kvGetReply @28 :UInt64;          # version
    kvRemove @29 :RemoveKey;
    kvRemoveReply @30 :Bool;         # existed
    kvExists @31 :Key;
    kvExistsReply @32 :Bool;         # exists
    clusterStatus @33 :Void;
    clusterStatusReply @34 :ClusterStatusReply;
    ping @35 :Void;
    leave @36 :Void;
    kvReserve @37 :KvReserve;
    kvReserveReply @38 :ReserveReply;
    kvCommit @39 :UInt64;            # reservation
    kvAbort @40 :UInt64;             # reservation
    invalidate @41 :Key;
    commitReply @42 :Bool;           # current
    listKeys @43 :ListKeys;
    listKeysReply @44 :ListKeysReply;
    countKeys @45 :Key;              # the key is the prefix
    countKeysReply @46 :UInt64;      # matching keys
    evict @47 :KeyVersion;
    evictReply @48 :Bool;            # evicted
    pin @49 :Pin;
    pinReply @50 :UInt64;            # the pinned key's committed version
    unpin @51 :Unpin;
    unpinReply @52 :Bool;            # it was pinned
    addReplica @53 :KeyVersion;
    addReplicaReply @54 :Bool;       # added: the version is current
    inventory @55 :Inventory;
    inventoryReply @56 :List(KeyVersion);  # held versions to free: the master does not list them
    claim @57 :Claim;
    claimReply @58 :ClaimReply;
    ownerCommits @59 :OwnerCommits;
    ownerCommitsReply @60 :List(KeyVersion);  # refused: free these versions
    barrier @61 :Void;
    flushed @62 :UInt64;             # reply to invalidate and barrier: the owner's commits through this sequence number were sent
    fetchRange @64 :FetchRange;      # answered with fetchReply, the bytes as payload
    rpc @65 :Rpc;                    # named handlers: serving, calls, the registry (docs/rpc.md)
    rdmaConnect @66 :RdmaConnect;    # owner -> owner: set up a queue pair to read the receiver's pool over RDMA
    rdmaConnectReply @67 :RdmaConnectReply;
    rdmaLease @68 :RdmaLease;        # reply to fetchRange with rdma set: where the bytes lie, held until released
    rdmaRelease @69 :UInt64;         # reader -> holder: the lease is done with
    mq @70 :Mq;                      # message queues: topics, producing, consumer groups (docs/wire-format.md, 6.3)
    kvPutCopies @71 :KvPutCopies;    # reply to a kvPut or kvCommit that asked for more than one copy
    repairCopy @72 :RepairCopy;      # master -> owner: copy a version from its holders and register the copy
  }

  # Owner -> master: this message follows the owner's commits through this
  # sequence number (OwnerCommits); the master acts on it only once it has
  # applied them. 0: it follows none.
  after @63 :UInt64;
}

enum Role {
  unknown @0;
  master @1;
  owner @2;
  client @3;
}

struct Hello {
  role @0 :Role;
  version @1 :UInt16;
  name @2 :Text;
  listenAddress @3 :Text;
}

struct ErrorReply {
  code @0 :UInt16;         # sluice::errc, pinned values
  message @1 :Text;
}

struct Key {
  key @0 :Data;
  # On an invalidation: the master's grant number when it sent it; the
  # owner gives up the key's slot and ignores grants numbered up to this.
  generation @1 :UInt64;
}

struct KeyVersion {
  key @0 :Data;
  version @1 :UInt64;
}

# One piece of a version's bytes: [offset, offset + length). Owners move
# large values as several of these in flight at once.
struct FetchRange {
  key @0 :Data;
  version @1 :UInt64;
  offset @2 :UInt64;
  length @3 :UInt64;
  rdma @4 :Bool;           # answer with rdmaLease (where the bytes lie) instead of the bytes
}

# One end of an RDMA queue pair (docs/rdma.md).
struct RdmaEndpoint {
  qpNumber @0 :UInt32;
  packetSequence @1 :UInt32;
  lid @2 :UInt16;          # InfiniBand local id; 0 on RoCE
  gid @3 :Data;            # 16 bytes
}

# A pool segment registered with the sender's RDMA device.
struct RdmaSegment {
  segment @0 :UInt32;      # index in the sender's pool
  address @1 :UInt64;
  length @2 :UInt64;
  rkey @3 :UInt32;
}

struct RdmaConnect {
  provider @0 :Text;       # "verbs" or "soft": both ends must use the same
  endpoint @1 :RdmaEndpoint;
}

struct RdmaConnectReply {
  provider @0 :Text;
  endpoint @1 :RdmaEndpoint;
  segments @2 :List(RdmaSegment);
}

struct RdmaLease {
  lease @0 :UInt64;        # named by rdmaRelease
  version @1 :UInt64;
  segment @2 :UInt32;      # where the bytes lie in the holder's pool
  offset @3 :UInt64;
  length @4 :UInt64;
  address @5 :UInt64;      # the bytes' address for one-sided reads
  rkey @6 :UInt32;
  leaseUs @7 :UInt64;      # the holder keeps the bytes this long at most
}

struct KeySize {
  key @0 :Data;
  size @1 :UInt64;
}

# A put's condition, checked when it is placed and again when it commits:
# ifAbsent — the key has no committed version; ifVersion (non-zero) — the
# key's committed version is this one. At most one of them is set.
struct Store {
  key @0 :Data;
  version @1 :UInt64;
  ttlMs @2 :UInt64;        # the put's time to live (the holder stops serving it from its fast index by then)
  replica @3 :Bool;        # an extra copy of a version its holder commits: register it with addReplica
}

# One page of what an owner holds, in key order: the versions of the keys
# after `after` (empty: from the first key) up to and including the last
# key listed — or to the end of the key space when `final` is set.
struct Inventory {
  after @0 :Data;
  entries @1 :List(KeyVersion);
  final @2 :Bool;
}

struct Pin {
  key @0 :Data;
  ttlMs @1 :UInt64;        # the pin lapses this long from now; 0: no time limit
  # Client -> owner: non-zero binds the pin to the client's session.
  # Owner -> master: the client's node id (the session), or 0: detached.
  session @2 :UInt64;
}

struct Unpin {
  key @0 :Data;
  session @1 :UInt64;      # as in Pin: lifts the pin of that session (0: the detached pins)
}

struct KvPut {
  key @0 :Data;
  ifAbsent @1 :Bool;
  ifVersion @2 :UInt64;
  ttlMs @3 :UInt64;        # the value expires this long after it commits; 0: never
  replicas @4 :UInt8;      # copies on distinct owners; 0 or 1: one
  preferOwner @5 :Text;    # the name of the owner to place the value on, when it can take it
  minReplicas @6 :UInt8;   # the put succeeds with this many copies committed; 0: all `replicas`
}

struct KvPutCopies {
  version @0 :UInt64;
  copies @1 :UInt8;        # copies committed, on distinct owners (at least the put's minReplicas)
}

struct KvReserve {
  key @0 :Data;
  size @1 :UInt64;
  ifAbsent @2 :Bool;
  ifVersion @3 :UInt64;
  ttlMs @4 :UInt64;
  replicas @5 :UInt8;
  preferOwner @6 :Text;
  minReplicas @7 :UInt8;   # as in KvPut
}

struct RemoveKey {
  key @0 :Data;
  ifVersion @1 :UInt64;    # non-zero: remove only this committed version
}

struct ListKeys {
  prefix @0 :Data;
  startAfter @1 :Data;     # keys after this one (sorted bytewise); empty: from the start
  limit @2 :UInt32;
}

struct KeyInfo {
  key @0 :Data;
  version @1 :UInt64;
  size @2 :UInt64;
}

struct ListKeysReply {
  keys @0 :List(KeyInfo);
  more @1 :Bool;           # keys after the last one listed match too
}

struct PoolRegion {
  segment @0 :UInt32;
  offset @1 :UInt64;
  length @2 :UInt64;
}

struct ReserveReply {
  reservation @0 :UInt64;
  where @1 :PoolRegion;
}

struct RegisterOwner {
  name @0 :Text;
  address @1 :Text;
  capacityBytes @2 :UInt64;
  # Drawn at random each time the owner process starts: a registration
  # with another incarnation than the master recorded means the owner
  # restarted and lost what it held.
  incarnation @3 :UInt64;
  evicts @4 :Bool;         # the owner evicts values to make room when full
  # The first of the owner's own commits (OwnerCommits) no master
  # acknowledged; those before it were applied by a master.
  commitsFrom @5 :UInt64;
}

# Owner -> master: hand this owner the writes of these key slots — it then
# commits puts of their keys itself, reporting them with OwnerCommits —
# and, when `versions` is set or slots are granted, a fresh block of
# versions to give out.
struct Claim {
  slots @0 :List(UInt16);
  versions @1 :Bool;
}

struct ClaimReply {
  granted @0 :List(UInt16);
  blockFirst @1 :UInt64;     # versions blockFirst .. blockFirst + blockCount - 1 are the owner's
  blockCount @2 :UInt64;
  generation @3 :UInt64;     # the grant's number; an invalidation with a higher one takes the slots back
}

# Owner -> master: puts the owner committed itself in the slots it was
# handed, numbered from firstSeq on (one per entry, in order).
struct OwnerCommits {
  firstSeq @0 :UInt64;
  entries @1 :List(OwnerCommit);
}

struct OwnerCommit {
  key @0 :Data;
  version @1 :UInt64;
  size @2 :UInt64;
  # The version of the key this commit replaced in the owner's store,
  # which the owner dropped itself; 0: none.
  replaced @3 :UInt64;
}

struct RegisterOwnerReply {
  heartbeatIntervalUs @0 :UInt64;
  leaseUs @1 :UInt64;
}

struct Heartbeat {
  usedBytes @0 :UInt64;
  objectCount @1 :UInt64;
  evictions @2 :UInt64;    # values the owner evicted since it started
  sessions @3 :List(UInt64);  # node ids of the clients connected to the owner now
  links @4 :List(LinkState);  # how the owner reaches the other owners it talked to
  underReplicatedPuts @5 :UInt64;  # puts that left their version with fewer copies than asked, since it started
  ownersSeen @6 :UInt64;   # the generation of the master's owner list the owner holds (HeartbeatReply)
}

# An up owner, as the master lists the owners to each other (relays).
struct OwnerAddress {
  id @0 :UInt64;
  name @1 :Text;
  address @2 :Text;
}

# One way an owner reaches a peer, as its link manager sees it.
struct PathState {
  kind @0 :Text;           # "rdma", "tcp", "relay"
  health @1 :Text;         # "untried", "up", "down"
  failures @2 :UInt32;     # failures in a row
  retryInUs @3 :UInt64;    # down: until the next retry
  lastError @4 :Text;
  bytes @5 :UInt64;        # payload bytes the path carried
}

struct LinkState {
  peer @0 :UInt64;         # the other owner's node id
  peerName @1 :Text;
  active @2 :Text;         # the path traffic takes now ("": none)
  via @3 :UInt64;          # the owner that relayed to the peer last (0: none)
  paths @4 :List(PathState);  # in the owner's order of preference
}

struct HeartbeatReply {
  known @0 :Bool;
  ownersGeneration @1 :UInt64;      # the master's owner list now ...
  owners @2 :List(OwnerAddress);    # ... and the list, when the heartbeat saw another generation
}

struct Replica {
  owner @0 :UInt64;
  address @1 :Text;
}

struct Place {
  key @0 :Data;
  size @1 :UInt64;
  preferred @2 :UInt64;
  ifAbsent @3 :Bool;
  ifVersion @4 :UInt64;
  ttlMs @5 :UInt64;
  replicas @6 :UInt8;
  preferOwner @7 :Text;
  minReplicas @8 :UInt8;   # fewer up owners than `replicas` but at least this many: place on those; 0: `replicas`
}

struct PlaceReply {
  version @0 :UInt64;
  target @1 :Replica;
  extra @2 :List(Replica);   # owners for further copies (put replicas > 1)
}

struct Commit {
  key @0 :Data;
  version @1 :UInt64;
  size @2 :UInt64;
}

struct LocateReply {
  version @0 :UInt64;
  size @1 :UInt64;
  replicas @2 :List(Replica);
}

enum MemberState {
  up @0;
  down @1;
}

struct MemberStatus {
  id @0 :UInt64;
  role @1 :Role;
  name @2 :Text;
  address @3 :Text;
  state @4 :MemberState;
  capacityBytes @5 :UInt64;
  usedBytes @6 :UInt64;
  objectCount @7 :UInt64;
  lastHeartbeatAgeUs @8 :UInt64;
  evictions @9 :UInt64;
  storedBytes @10 :UInt64;    # what the owner reports it holds (heartbeat)
  storedObjects @11 :UInt64;
  homeSlots @12 :UInt32;      # key slots whose puts the owner commits itself
  ownCommits @13 :UInt64;     # puts the owner committed itself that the master applied
  links @14 :List(LinkState);  # as the owner last reported
  underReplicatedPuts @15 :UInt64;  # as the owner last reported (heartbeat)
  masterVia @16 :UInt64;      # the owner its requests to the master last came through; 0: its own link
}

struct ClusterStatusReply {
  master @0 :UInt64;
  objectCount @1 :UInt64;
  members @2 :List(MemberStatus);
  repair @3 :RepairStatus;
}

# Objects below their copy target and the copies made to restore them.
struct RepairStatus {
  underReplicated @0 :UInt64;
  withoutLiveCopy @1 :UInt64;
  copiesInFlight @2 :UInt64;
  copiesMade @3 :UInt64;
  bytesCopied @4 :UInt64;
  copiesFailed @5 :UInt64;
}

# Repair: make a copy of a version here, reading it from its holders in
# turn, and register it (addReplica). Answered `ok` once registered.
struct RepairCopy {
  key @0 :Data;
  version @1 :UInt64;
  size @2 :UInt64;
  holders @3 :List(Replica);
}

# Named handlers (docs/rpc.md). Every RPC message is a member of this one
# union, so the RPC protocol grows here without taking Envelope members.
struct Rpc {
  union {
    serve @0 :RpcServe;              # client -> owner, on the link that will receive the calls
    unserve @1 :Text;                # client -> owner: stop serving this name
    sync @2 :List(RpcInstance);      # owner -> master: every instance this owner serves now
    lookup @3 :RpcLookup;            # -> master (through the owner): instances of a name, or of names with a prefix
    instances @4 :List(RpcInstance); # the reply to lookup
    call @5 :RpcCall;                # caller -> owner(s) -> handler; the payload is the arguments (a dict)
    reply @6 :UInt64;                # the reply to call: a result buffer, or 0 when the payload is the result (a dict)
    cancel @7 :UInt64;               # one-way: the caller gave up the call with this request id
    buffer @8 :UInt64;               # client -> its owner: pool memory of this many bytes for arguments or a result
    bufferReply @9 :RpcBufferReply;  # the reply to buffer
    release @10 :UInt64;             # one-way, client -> its owner: give this unused buffer back
  }
}

struct RpcServe {
  name @0 :Text;
  maxConcurrent @1 :UInt32;  # calls the handler runs at once; more are answered `overloaded`
  stream @2 :Bool;           # the handler answers with a stream of results
}

struct RpcInstance {
  name @0 :Text;
  client @1 :UInt64;         # node id of the serving client
  clientName @2 :Text;
  owner @3 :UInt64;          # node id of the owner the client is attached to
  ownerAddress @4 :Text;     # where other owners reach that owner (set by the master)
  maxConcurrent @5 :UInt32;
  stream @6 :Bool;           # the name is served as a stream of results
}

struct RpcLookup {
  name @0 :Text;
  prefix @1 :Bool;           # every name starting with `name`, not just `name`
}

struct RpcCall {
  method @0 :Text;           # the served name
  target @1 :UInt64;         # node id of the client to call; 0: any live instance
  routing @2 :UInt8;         # with target 0: 0 round robin, 1 least outstanding
  argsBuffer @3 :UInt64;     # non-zero: the arguments are this buffer (bufferReply), not the payload
  caller @4 :UInt64;         # node id of the calling client (set by owners: the envelope's source may be an owner)
}

struct RpcBufferReply {
  buffer @0 :UInt64;         # names the buffer in a call (argsBuffer) or a reply
  where @1 :PoolRegion;      # where to write it in the owner's pool
}

# Message queues. Every MQ message is a member of this one union, as RPC's
# are of Rpc. Client -> its owner -> the master and back; the owner stamps
# `session` fields with the client's node id. Payloads are data-plane
# objects put before: messages name them by key, never carry their bytes.
struct Mq {
  union {
    createTopic @0 :MqCreateTopic;          # create a topic, or check an existing one has this config
    topicCreated @1 :Bool;                  # the reply to createTopic: false when it existed with this config
    deleteTopic @2 :Text;                   # the topic's name
    listTopics @3 :Void;
    topics @4 :List(MqTopicInfo);           # the reply to listTopics, in name order
    produce @5 :MqProduce;
    produced @6 :List(MqProducedOne);       # the reply to produce: one per message, in the order sent
    join @7 :MqJoin;                        # join a group (created when new), or renew the lease in it
    joined @8 :List(MqPartitionRef);        # the reply to join: the partitions the member holds now
    leave @9 :MqLeave;
    poll @10 :MqPoll;
    polled @11 :List(MqDelivery);           # the reply to poll
    settle @12 :MqSettle;                   # ack, ack up to, or nack deliveries
    settled @13 :UInt64;                    # the reply to settle: how many deliveries it settled
    seek @14 :MqSeek;
    groupStatus @15 :Text;                  # a group's name; "": every group
    groupStatusReply @16 :List(MqPartitionLag);
    deleteGroup @17 :Text;                  # the group's name
    prefetch @18 :MqPrefetch;               # master -> a consumer's owner: fetch this payload here ahead of its read
  }
}

struct MqTopicConfig {
  partitions @0 :UInt32;
  maxAgeMs @1 :Int64;          # how long a message is kept; 0: no limit
  maxBytes @2 :UInt64;         # per partition; 0: no limit
  maxMessages @3 :UInt64;      # per partition; 0: no limit
  full @4 :UInt8;              # an append to a full partition: 0 blocks, 1 is rejected, 2 drops the oldest
  payloadReplicas @5 :UInt32;  # copies of each payload
  maxMessageBytes @6 :UInt64;  # the largest payload a message may name
  dedupeWindowMs @7 :Int64;    # how long a (producer, message id) is remembered; 0: no dedupe
  dedupeEntriesMax @8 :UInt64; # how many the window remembers at most
  deadLetter @9 :Text;         # where a message out of deliveries goes; empty: dropped
}

struct MqCreateTopic {
  topic @0 :Text;
  config @1 :MqTopicConfig;
}

struct MqPartitionInfo {
  start @0 :UInt64;            # the first offset still held
  end @1 :UInt64;              # the offset the next append gets
  bytes @2 :UInt64;            # payload bytes the partition names
}

struct MqTopicInfo {
  topic @0 :Text;
  config @1 :MqTopicConfig;
  partitions @2 :List(MqPartitionInfo);  # in partition order
}

struct MqMessage {
  payload @0 :Data;            # the payload's object key (committed before)
  sizeBytes @1 :UInt64;        # the payload's size
  messageId @2 :Data;          # empty: none (no dedupe)
  key @3 :Data;                # partition key; empty: none
  hasPartition @4 :Bool;       # `partition` names the partition (and wins over `key`)
  partition @5 :UInt32;
}

struct MqProduce {
  topic @0 :Text;
  session @1 :UInt64;          # node id of the producer (stamped by its owner)
  messages @2 :List(MqMessage);
}

struct MqProducedOne {
  code @0 :UInt16;             # sluice::errc, pinned values; 0 (ok): appended, or a duplicate
  message @1 :Text;            # why not, when code is not 0
  partition @2 :UInt32;
  offset @3 :UInt64;
  duplicate @4 :Bool;          # the dedupe window had it: nothing was appended
}

struct MqGroupConfig {
  topics @0 :List(Text);       # the topics the group reads
  ackTimeoutMs @1 :Int64;      # a delivery not settled by then goes out again
  maxDeliveries @2 :UInt32;    # deliveries of one message before it is dead-lettered
  prefetch @3 :UInt32;         # deliveries one member holds unsettled at most
  start @4 :UInt8;             # where a new group starts: 0 earliest, 1 latest
}

struct MqJoin {
  group @0 :Text;
  session @1 :UInt64;          # node id of the member (stamped by its owner)
  config @2 :MqGroupConfig;
  leaseMs @3 :UInt64;          # the member is dropped when it neither polls nor joins for this long
}

struct MqPartitionRef {
  topic @0 :Text;
  partition @1 :UInt32;
}

struct MqLeave {
  group @0 :Text;
  session @1 :UInt64;
}

struct MqPoll {
  group @0 :Text;
  session @1 :UInt64;          # renews the member's lease
  maxMessages @2 :UInt32;
  maxBytes @3 :UInt64;         # 0: any
  waitMs @4 :UInt64;           # how long to wait (within the deadline) when nothing is due
  pollSeq @5 :UInt64;          # the member's count of its polls, this one included; 0: not counted
  answeredSeq @6 :UInt64;      # the last of its polls whose answer reached it
  settles @7 :List(MqSettle);  # applied first, in order (their group and session are the poll's)
}

struct MqDelivery {
  partition @0 :MqPartitionRef;
  offset @1 :UInt64;
  payload @2 :Data;            # the payload's object key
  sizeBytes @3 :UInt64;
  deliveryCount @4 :UInt32;    # 1 the first time it goes out
  generation @5 :UInt64;       # the partition's generation when it went out: settle carries it
  ackDeadlineMs @6 :Int64;     # when it goes out again unless settled
  messageId @7 :Data;          # the producer's message id, or a dead-lettered message's origin; empty: none
}

# A payload a member of a group on the receiving owner's host will read
# soon: fetch it from its holders into this owner's pool and keep it for
# that read. Answered `ok` once it is here (or was already).
struct MqPrefetch {
  payload @0 :Data;            # the payload's object key
  version @1 :UInt64;
  size @2 :UInt64;
  holders @3 :List(Replica);   # up owners holding that version, to read from in turn
}

struct MqSettle {
  group @0 :Text;
  session @1 :UInt64;
  kind @2 :UInt8;              # 0 ack, 1 ack everything up to `offset`, 2 nack
  partition @3 :MqPartitionRef;
  offset @4 :UInt64;
  generation @5 :UInt64;       # ack, nack: the delivery's
  delayMs @6 :Int64;           # nack: when to deliver it again
  answeredSeq @7 :UInt64;      # ack up to: only what polls up to this one delivered; 0: any
}

struct MqSeek {
  group @0 :Text;
  partition @1 :MqPartitionRef;
  byTime @2 :Bool;             # seek to the first message appended at `timeMs` or later, not to `offset`
  offset @3 :UInt64;
  timeMs @4 :Int64;
}

struct MqPartitionLag {
  group @0 :Text;
  partition @1 :MqPartitionRef;
  member @2 :UInt64;           # node id of the member holding it; 0: none
  generation @3 :UInt64;       # grows whenever the partition changes hands
  committed @4 :UInt64;        # offsets below it are settled
  next @5 :UInt64;             # the next offset to go out
  inFlight @6 :UInt64;         # deliveries out and not settled
  lagMessages @7 :UInt64;
  lagBytes @8 :UInt64;
}
