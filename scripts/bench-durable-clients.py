"""The other engines' side of scripts/bench-durable.sh: N client processes, each doing durable
cycles for S seconds against one running server; prints {"engine", "clients", "cycles_per_s"}.

A cycle is what one submit + ack is for `pantheon mcp`:
  nats   publish to a JetStream stream (waits for the stream's PubAck), fetch it from a durable pull
         consumer of the client's own subject, ack it and wait for the server's reply (ack_sync)
  redis  XADD to the client's stream, XREADGROUP one entry as a consumer group member, XACK it
  dbos   one DBOS workflow of two steps (each step's result and the workflow's status written to
         PostgreSQL before it returns)

Usage: bench-durable-clients.py ENGINE CLIENTS SECONDS URL
"""

import json
import multiprocessing as mp
import sys
import time


def nats_client(k, seconds, url, out):
    import asyncio

    import nats

    async def go():
        nc = await nats.connect(url)
        js = nc.jetstream()
        subject = f"bench.c{k}"
        sub = await js.pull_subscribe(subject, durable=f"c{k}", stream="BENCH")
        n = 0
        start = time.monotonic()
        while time.monotonic() - start < seconds:
            await js.publish(subject, b'{"summary":"bench"}')
            msgs = await sub.fetch(1, timeout=5)
            for m in msgs:
                await m.ack_sync()
            n += 1
        out.put(n / (time.monotonic() - start))
        await nc.close()

    asyncio.run(go())


def redis_client(k, seconds, url, out):
    import redis

    r = redis.Redis.from_url(url)
    stream = f"bench:c{k}"
    try:
        r.xgroup_create(stream, "g", id="0", mkstream=True)
    except redis.ResponseError:
        pass
    n = 0
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        r.xadd(stream, {"summary": "bench"})
        got = r.xreadgroup("g", f"c{k}", {stream: ">"}, count=1)
        for _, entries in got:
            for eid, _ in entries:
                r.xack(stream, "g", eid)
        n += 1
    out.put(n / (time.monotonic() - start))


def dbos_client(k, seconds, url, out):
    from dbos import DBOS, DBOSConfig

    config: DBOSConfig = {"name": "bench-durable", "system_database_url": url}
    DBOS(config=config)

    @DBOS.step()
    def submit(x):
        return x + 1

    @DBOS.step()
    def ack(x):
        return x * 2

    @DBOS.workflow()
    def cycle(x):
        return ack(submit(x))

    DBOS.launch()
    n = 0
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        cycle(n)
        n += 1
    out.put(n / (time.monotonic() - start))
    DBOS.destroy()


def main():
    engine, clients, seconds, url = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
    target = {"nats": nats_client, "redis": redis_client, "dbos": dbos_client}[engine]
    out = mp.Queue()
    procs = [mp.Process(target=target, args=(k, seconds, url, out)) for k in range(clients)]
    for p in procs:
        p.start()
    rates = [out.get(timeout=seconds + 120) for _ in procs]
    for p in procs:
        p.join()
    print(json.dumps({"engine": engine, "clients": clients, "cycles_per_s": round(sum(rates), 1)}))


if __name__ == "__main__":
    main()
