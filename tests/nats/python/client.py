"""A small nats-py client standing in for the origin's NATS code in tests/nats (core NATS only,
as the origin's listener subscribes and publishes).

  client.py URL listen SUBJECT OUT     subscribe (core) and append each message body as one line
                                       of OUT (flushed per message) until killed; prints "ready"
  client.py URL publish SUBJECT FILE   publish each line of FILE (core), flush, exit
  client.py URL stream-msgs NAME       print the number of messages JetStream stream NAME holds
  client.py URL stream-add NAME SUBJ   create JetStream stream NAME holding subject SUBJ
  client.py URL stream-get NAME SEQ    print the body of message SEQ of JetStream stream NAME
  client.py URL request SUBJECT BODY   send BODY as a request (core), print the reply's body
"""

import asyncio
import json
import sys

import nats


async def listen(nc, subject, out):
    with open(out, "ab", buffering=0) as f:

        async def on_msg(msg):
            f.write(msg.data.replace(b"\n", b" ") + b"\n")

        await nc.subscribe(subject, cb=on_msg)
        await nc.flush()
        print("ready", flush=True)
        while True:
            await asyncio.sleep(3600)


async def publish(nc, subject, path):
    with open(path, "rb") as f:
        for line in f:
            line = line.rstrip(b"\n")
            if line:
                await nc.publish(subject, line)
    await nc.flush()


async def stream_msgs(nc, name):
    js = nc.jetstream()
    info = await js.stream_info(name)
    print(json.dumps({"messages": info.state.messages}), flush=True)


async def stream_add(nc, name, subject):
    js = nc.jetstream()
    await js.add_stream(name=name, subjects=[subject])


async def stream_get(nc, name, seq):
    js = nc.jetstream()
    msg = await js.get_msg(name, seq=int(seq))
    print(msg.data.decode(), flush=True)


async def request(nc, subject, body):
    msg = await nc.request(subject, body.encode(), timeout=20)
    print(msg.data.decode(), flush=True)


async def main():
    url, cmd = sys.argv[1], sys.argv[2]
    nc = await nats.connect(url, allow_reconnect=True, max_reconnect_attempts=-1)
    try:
        if cmd == "listen":
            await listen(nc, sys.argv[3], sys.argv[4])
        elif cmd == "publish":
            await publish(nc, sys.argv[3], sys.argv[4])
        elif cmd == "stream-msgs":
            await stream_msgs(nc, sys.argv[3])
        elif cmd == "request":
            await request(nc, sys.argv[3], sys.argv[4])
        elif cmd == "stream-add":
            await stream_add(nc, sys.argv[3], sys.argv[4])
        elif cmd == "stream-get":
            await stream_get(nc, sys.argv[3], sys.argv[4])
        else:
            raise SystemExit(f"unknown command {cmd}")
    finally:
        await nc.close()


if __name__ == "__main__":
    asyncio.run(main())
