'use strict'
// The transactional producer (plan txn-producer; chaos/workloads/txn_producer.py is the reference): each
// attempt writes --records records over the partitions of two topics in one KafkaJS transaction, then commits,
// or deliberately aborts an --abort-share of them. History: init, then txn invoke / ok (+ offsets) | fail | info.

const { newCtx } = require('./main')
const { newKafka, partitionCounts } = require('./conn')
const { attemptId, recordId, keyNumber } = require('./records')
const { txnArgs, TransactionalClient, describe, writeOf } = require('./txn')
const { usage } = require('./log')

class Producer extends TransactionalClient {
  constructor(ctx, t, kafka, opts) {
    super(ctx, t, kafka)
    Object.assign(this, opts) // topics, records, keys, abortShare
    this.attemptNo = ctx.firstAttempt
    this.partitions = {}
  }

  plan() {
    const ws = []
    for (let i = 0; i < this.records; i++) {
      const topic = this.topics[i % 2]
      const id = recordId(this.ctx.runTag, this.ctx.process, this.attemptNo, i)
      if (this.keys > 0) {
        const n = keyNumber(id, this.keys)
        ws.push({ topic, partition: n % this.partitions[topic], id, key: `k${n}` })
      } else {
        ws.push({ topic, partition: this.ctx.rng.intn(this.partitions[topic]), id })
      }
    }
    return ws
  }

  async oneAttempt() {
    const attempt = attemptId(this.ctx.runTag, this.ctx.process, this.attemptNo)
    const abort = this.ctx.rng.random() < this.abortShare
    const ws = this.plan()
    this.attemptNo++
    const value = { attempt, producer: this.ctx.process, txn_id: this.t.txnId, abort, writes: ws.map(writeOf) }
    this.ctx.history.invoke('txn', value)
    const [outcome, extra] = await this.transact(attempt, ws, abort)
    this.ctx.history.complete(outcome, 'txn', { ...value, ...extra })
  }

  async transact(attempt, ws, abort) {
    let txn
    try {
      txn = await this.call('begin_transaction', this.t.requestS, () => this.producer.transaction())
    } catch (err) {
      return ['fail', await this.dropAfter([err], { error: describe(err) })]
    }
    let offsets
    try {
      offsets = await this.produceAll(txn, attempt, ws)
    } catch (err) {
      return this.abortAfter(txn, err)
    }
    if (abort) return this.abortDeliberately(txn)
    return this.commit(txn, offsets)
  }
}

// Pacer: at most rate attempts a second (0: unbounded), without drifting (base.py Pacer).
class Pacer {
  constructor(rate) {
    this.intervalMs = rate > 0 ? 1000 / rate : 0
    this.next = performance.now()
  }

  async wait(ctx) {
    if (!this.intervalMs) return
    this.next = Math.max(this.next + this.intervalMs, performance.now() - this.intervalMs)
    const delay = this.next - performance.now()
    if (delay > 0) await ctx.wait(delay)
  }
}

async function runProducer(a) {
  // Every option is read before the history is touched: a bad one exits 2 before any operation.
  if (a.list('--topics').length !== 2) usage('the following arguments are required: --topics')
  const t = txnArgs(a)
  const rate = a.num('--rate', 20)
  const opts = { topics: a.list('--topics'), records: a.integer('--records', 6), keys: a.integer('--keys', 0),
    abortShare: a.num('--abort-share', 0.2) }
  if (opts.keys < 0) usage(`--keys ${opts.keys}: 0 (no keys) or a number of keys`)
  const ctx = await newCtx(a)
  const p = new Producer(ctx, t, newKafka(t.requestMs, `${ctx.runTag}.${ctx.process}`), opts)
  p.partitions = await partitionCounts(ctx, p.topics)
  const pacer = new Pacer(rate)
  while (!ctx.stopping()) {
    if (await p.ensureProducer()) await p.oneAttempt()
    else await ctx.wait(1000)
    await pacer.wait(ctx)
  }
  await p.drop()
  await ctx.finish(0)
}

module.exports = { runProducer }
