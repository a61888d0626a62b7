"""MQ from Python: producers, consumer groups, the iterator and async
iterator, values that alias the pool, and the errors of bad input."""

import asyncio
import threading
import time
import uuid

import numpy as np
import pytest

import sluice
from conftest import in_pool


def fresh(name):
    return f"{name}-{uuid.uuid4().hex[:8]}"


def test_produce_then_iterate_in_order_and_ack(client):
    topic, group = fresh("t"), fresh("g")
    p = client.producer("py-order")
    assert p.create_topic(topic) is True
    assert p.create_topic(topic) is False  # the same options again: exists
    sent = [f"message {i}".encode() * (i + 1) for i in range(20)]
    offsets = [p.produce(topic, m) for m in sent]
    assert [o.offset for o in offsets] == list(range(20))
    assert all(o.partition == 0 and not o.duplicate for o in offsets)

    got = []
    with client.consumer(group, topic, batch=7) as consumer:
        for msg in consumer:
            assert msg.topic == topic and msg.delivery_count == 1
            got.append((msg.offset, bytes(msg.value)))
            msg.ack()
            if len(got) == len(sent):
                break
    assert got == list(enumerate(sent))
    lag = p.lag(group)
    assert [(x["partition"], x["committed"], x["messages"]) for x in lag] == [(0, 20, 0)]


def test_dict_and_tensor_values_alias_the_pool(client):
    topic, group = fresh("t"), fresh("g")
    p = client.producer()
    p.create_topic(topic, partitions=2)
    big = np.arange(1 << 18, dtype=np.float32)  # 1 MiB: written straight into a reservation
    small = np.arange(12, dtype=np.int16).reshape(3, 4)
    p.produce(topic, {"step": 7, "name": "frame", "header": b"hdr", "body": big}, partition=1)
    p.produce(topic, small, partition=0)
    p.produce(topic, [b"head-", b"body"], partition=0)  # gathered, not concatenated first

    consumer = client.consumer(group, [topic])
    msgs = []
    while len(msgs) < 3:
        msgs += consumer.poll(max_messages=8, wait=2.0)
    by_place = {(m.partition, m.offset): m for m in msgs}
    d = by_place[(1, 0)].value
    assert d["step"] == 7 and d["name"] == "frame" and bytes(d["header"]) == b"hdr"
    body = np.from_dlpack(d["body"])
    assert body.dtype == np.float32 and np.array_equal(body, big)
    assert in_pool(body.ctypes.data, body.nbytes)
    t = np.from_dlpack(by_place[(0, 0)].value)
    assert t.shape == (3, 4) and np.array_equal(t, small)
    assert bytes(by_place[(0, 1)].value) == b"head-body"
    for m in msgs:
        consumer.ack(m)
    consumer.close()
    assert consumer.closed


def test_produce_many_and_dedupe_by_msg_id(client):
    topic = fresh("t")
    p = client.producer("py-dedupe")
    p.create_topic(topic, partitions=3, dedupe_window=60.0)
    done = p.produce_many(topic, [b"a", b"b", b"c"], keys=["k1", "k2", "k1"], msg_ids=["1", "2", "3"])
    assert len(done) == 3 and not any(d.duplicate for d in done)
    assert done[0].partition == done[2].partition  # one key, one partition
    again = p.produce(topic, b"a-retry", msg_id="1")
    assert again.duplicate and (again.partition, again.offset) == (done[0].partition, done[0].offset)
    held = sum(part["end"] - part["start"] for t in p.topics() if t["name"] == topic for part in t["partition_info"])
    assert held == 3
    mixed = p.produce_many(topic, [b"x", {"n": 1}], msg_ids=["4", "5"])
    assert [m.duplicate for m in mixed] == [False, False]


def test_nack_redelivers_and_seek_replays(client):
    topic, group = fresh("t"), fresh("g")
    p = client.producer()
    p.create_topic(topic)
    for i in range(3):
        p.produce(topic, bytes([i]) * 10)
    keeper = client.consumer(fresh("keeper"), topic)  # a group that acks nothing keeps the log
    c = client.consumer(group, topic)
    first = c.poll(max_messages=1, wait=2.0)
    assert len(first) == 1 and first[0].offset == 0
    first[0].nack()
    again = c.poll(max_messages=1, wait=2.0)
    assert again[0].offset == 0 and again[0].delivery_count == 2
    again[0].ack()
    with pytest.raises(sluice.NotFound):
        again[0].ack()  # no longer held unacked
    rest = []
    while len(rest) < 2:
        rest += c.poll(wait=2.0)
    assert c.ack_upto(topic, 0, 2) == 2
    c.seek(topic, 0, 1)
    replay = []
    while len(replay) < 2:
        replay += c.poll(wait=2.0)
    assert [m.offset for m in replay] == [1, 2]
    assert bytes(replay[0].value) == b"\x01" * 10
    keeper.close()


def test_poll_acks_the_last_batch_in_the_same_request(client):
    topic, group = fresh("t"), fresh("g")
    p = client.producer()
    p.create_topic(topic)
    for i in range(6):
        p.produce(topic, bytes([i]) * 8)
    c = client.consumer(group, topic)
    first = c.poll(max_messages=3, wait=2.0)
    assert [m.offset for m in first] == [0, 1, 2]
    second = c.poll(max_messages=3, wait=2.0, ack=first)
    assert [m.offset for m in second] == [3, 4, 5]
    assert [(x["committed"], x["in_flight"]) for x in p.lag(group)] == [(3, 3)]
    with pytest.raises(sluice.NotFound):
        c.poll(wait=0.1, ack=[second[0], first[0]])  # first[0] is acked already
    assert [(x["committed"], x["in_flight"]) for x in p.lag(group)] == [(4, 2)]
    assert c.poll(wait=0.1, ack=second[1:]) == []
    assert [(x["committed"], x["messages"]) for x in p.lag(group)] == [(6, 0)]
    with pytest.raises(TypeError):
        c.poll(ack=[b"not a message"])
    c.close()


def test_async_iteration(client):
    topic, group = fresh("t"), fresh("g")
    p = client.producer()
    p.create_topic(topic)

    async def main():
        consumer = client.consumer(group, [topic], wait=0.5)
        got = []
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        tick_task = asyncio.ensure_future(ticker())
        loop = asyncio.get_running_loop()
        loop.call_later(0.3, lambda: [p.produce(topic, f"m{i}".encode()) for i in range(5)])
        async for msg in consumer:
            got.append(bytes(msg.value))
            msg.ack()
            if len(got) == 5:
                break
        tick_task.cancel()
        consumer.close()
        return got, ticks

    got, ticks = asyncio.run(main())
    assert got == [f"m{i}".encode() for i in range(5)]
    assert ticks > 5  # the loop ran while the consumer waited


def test_poll_releases_the_gil_and_wakes_on_produce(client):
    topic, group = fresh("t"), fresh("g")
    p = client.producer()
    p.create_topic(topic)
    c = client.consumer(group, topic)
    counted = [0]
    stop = threading.Event()

    def count():
        while not stop.is_set():
            counted[0] += 1

    threading.Thread(target=count, daemon=True).start()
    threading.Timer(0.3, lambda: p.produce(topic, b"wake")).start()
    start = time.monotonic()
    msgs = c.poll(wait=10.0)
    waited = time.monotonic() - start
    stop.set()
    assert [bytes(m.value) for m in msgs] == [b"wake"]
    assert waited < 5.0  # woken by the produce, not by the 10 s wait
    assert counted[0] > 1000


def test_bad_input_gives_clear_errors(client):
    topic, group = fresh("t"), fresh("g")
    p = client.producer()
    with pytest.raises(sluice.NotFound, match="no topic"):
        p.produce(fresh("missing"), b"x")
    with pytest.raises(sluice.InvalidArgument, match="when_full"):
        p.create_topic(topic, when_full="sometimes")
    p.create_topic(topic, max_message_bytes=1024)
    with pytest.raises(sluice.Conflict):
        p.create_topic(topic, max_message_bytes=2048)
    with pytest.raises(sluice.InvalidArgument, match="at most 1024"):
        p.produce(topic, b"x" * 1025)
    with pytest.raises(sluice.InvalidArgument, match="at most 1024"):
        p.produce(topic, np.zeros(4096, dtype=np.uint8).reshape(64, 64))  # a tensor value over the limit
    with pytest.raises(sluice.InvalidArgument):
        client.consumer(group, [])
    with pytest.raises(sluice.InvalidArgument):
        client.consumer(group, topic, batch=0)
    c = client.consumer(group, topic)
    with pytest.raises(sluice.InvalidArgument):
        c.seek(topic, 0)  # neither an offset nor a time
    p.produce(topic, b"ok")
    msgs = c.poll(wait=2.0)
    c.close()
    with pytest.raises(sluice.ClientClosed):
        c.poll()
    with pytest.raises(sluice.ClientClosed):
        msgs[0].ack()
    assert list(c) == []  # a closed consumer's iterator ends


def test_dead_letter_topic_gets_messages_out_of_deliveries(client):
    topic, group, triage = fresh("jobs"), fresh("g"), fresh("triage")
    dead_topic = topic + ".dead"
    p = client.producer("py-dead")
    p.create_topic(dead_topic)
    p.create_topic(topic, dead_letter=dead_topic)
    assert [t["dead_letter"] for t in p.topics() if t["name"] == topic] == [dead_topic]
    p.produce(topic, b"poison", msg_id="job-7")
    with pytest.raises(sluice.InvalidArgument):
        p.create_topic(fresh("self"), dead_letter="bad name")

    consumer = client.consumer(group, topic, max_deliveries=2)
    for attempt in (1, 2):
        (msg,) = consumer.poll(max_messages=1, wait=2.0)
        assert msg.delivery_count == attempt and msg.message_id == "job-7"
        msg.nack()
    assert consumer.poll(max_messages=1, wait=0.3) == []

    (dead,) = client.consumer(triage, dead_topic).poll(max_messages=1, wait=2.0)
    assert bytes(dead.value) == b"poison"
    assert dead.message_id == f"{topic}/0/0@{group}"
    dead.ack()
