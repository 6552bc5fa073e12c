// A standalone reproduction of KafkaJS 2.2.4 committing a stale member's offsets in its transaction: sendOffsets
// sends TxnOffsetCommit with the group id only (no generation, no member id: KIP-447's fencing is missing), so a
// consume-transform-produce instance that fell out of its group still commits, and the inputs it had read get
// committed outputs from two instances.
//
// The story, with two exactly-once processors (a consumer of group G and a transactional producer each) on an input
// topic of one partition:
// 1. A joins G alone and is given the partition. For its first batch it begins a transaction, writes one output per
//    input, sends the batch's offsets to the transaction (transaction.sendOffsets with G), then stalls inside
//    eachBatch (a GC pause, a slow call) for longer than G's session timeout, without heartbeats;
// 2. B joins G meanwhile; A's session expires, the rebalance gives the partition to B, which reads the committed
//    offsets (none: the log start), processes the same inputs in its own transaction with its offsets and commits;
// 3. A wakes and commits its transaction. Expected (a client with KIP-447: Kafka's Java clients, librdkafka,
//    franz-go pass the consumer's group metadata to sendOffsets): the coordinator refuses A's offsets
//    (ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID), A aborts, every input has one committed output. KafkaJS: A's commit
//    is accepted, and a read_committed reader of the output topic finds two outputs for every input of the batch.
//
// Usage: node repro.js --brokers 127.0.0.1:9092[,...] [--records 10] [--topic NAME] [--control]
// --control: the same steps with A's stall shorter than the session timeout (A commits before B is given the
// partition, B starts at A's committed offset: no input is processed twice). It creates the topics (1 partition
// each, replication factor min(3, brokers)). Exit 1: the symptom was seen (inputs with two committed outputs); 0:
// not seen; 2: the run itself failed.
'use strict'

const { Kafka, logLevel } = require('kafkajs')

function option(name, fallback) {
  const at = process.argv.indexOf(`--${name}`)
  return at > 0 && at + 1 < process.argv.length ? process.argv[at + 1] : fallback
}

const brokers = option('brokers', '127.0.0.1:9092').split(',')
const records = Number(option('records', '10'))
const stamp = Date.now()
const input = option('topic', `kafkajs-kip-447-${stamp}`)
const output = `${input}-out`
const groupId = `${input}-group`
const control = process.argv.includes('--control')
const SESSION_MS = 10000
const STALL_MS = control ? 1000 : SESSION_MS + 8000
const TIMEOUT_MS = 60000

const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))

async function until(what, check, ms = TIMEOUT_MS) {
  const deadline = Date.now() + ms
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await sleep(100)
  }
}

// One exactly-once processor: a consumer of the group and a transactional producer; each batch one transaction
// holding an output per input and the batch's offsets (sendOffsets), committed after `stallMs`.
async function processor(name, stallMs, state) {
  const kafka = new Kafka({ clientId: `${name}-${stamp}`, brokers, logLevel: logLevel.NOTHING })
  const producer = kafka.producer({ transactionalId: `${input}-${name}`, maxInFlightRequests: 1, idempotent: true,
                                    transactionTimeout: 60000 })
  await producer.connect()
  const consumer = kafka.consumer({ groupId, sessionTimeout: SESSION_MS, rebalanceTimeout: 20000,
                                    heartbeatInterval: 1000, maxWaitTimeInMs: 500, readUncommitted: false })
  consumer.on(consumer.events.GROUP_JOIN, e => console.log(
    `${name} joined the group: assigned partitions [${e.payload.memberAssignment[input] || []}]`))
  await consumer.connect()
  await consumer.subscribe({ topic: input, fromBeginning: true })
  await consumer.run({
    autoCommit: false, eachBatchAutoResolve: false,
    eachBatch: async ({ batch, resolveOffset }) => {
      if (state.batches[name] >= 1 || !batch.messages.length) return
      state.batches[name] = 1
      const first = batch.messages[0].offset
      const last = batch.messages.at(-1).offset
      const txn = await producer.transaction()
      await txn.send({ topic: output, messages: batch.messages.map(m => ({ value: `${m.value}` })) })
      await txn.sendOffsets({ consumerGroupId: groupId,
                              topics: [{ topic: input, partitions: [{ partition: batch.partition, offset: String(Number(last) + 1) }] }] })
      console.log(`${name}: read offsets ${first}-${last}, wrote ${batch.messages.length} outputs and sent offset ` +
                  `${Number(last) + 1} to its transaction; stalls ${stallMs / 1000} s before committing`)
      state.inTransaction[name] = true
      await sleep(stallMs)
      try {
        await txn.commit()
        console.log(`${name}: transaction committed (offsets ${first}-${last})`)
        state.committed[name] = true
      } catch (err) {
        console.log(`${name}: commit refused: ${err.type || err.name}: ${err.message}`)
        await txn.abort().catch(() => {})
        state.committed[name] = false
      }
      for (const m of batch.messages) resolveOffset(m.offset)
    },
  })
  return { consumer, producer }
}

async function readCommitted(kafka) {
  const consumer = kafka.consumer({ groupId: `${input}-reader`, readUncommitted: false, maxWaitTimeInMs: 500 })
  const values = []
  await consumer.connect()
  await consumer.subscribe({ topic: output, fromBeginning: true })
  await consumer.run({ eachMessage: async ({ message }) => { values.push(`${message.value}`) } })
  await sleep(5000)
  await consumer.disconnect()
  return values
}

async function main() {
  const kafka = new Kafka({ clientId: `setup-${stamp}`, brokers, logLevel: logLevel.NOTHING })
  const admin = kafka.admin()
  await admin.connect()
  const cluster = await admin.describeCluster()
  const replicationFactor = Math.min(3, cluster.brokers.length)
  await admin.createTopics({ topics: [input, output].map(topic => ({ topic, numPartitions: 1, replicationFactor })),
                             waitForLeaders: true })
  const producer = kafka.producer()
  await producer.connect()
  await producer.send({ topic: input, messages: Array.from({ length: records }, (_, n) => ({ value: `input-${n}` })) })
  await producer.disconnect()
  console.log(`topic ${input}: ${records} inputs at offsets 0-${records - 1}; group ${groupId}; outputs to ${output}`)

  const state = { batches: {}, inTransaction: {}, committed: {} }
  const a = await processor('A', STALL_MS, state)
  await until('A to read its first batch and open its transaction', () => state.inTransaction.A)
  const b = await processor('B', 0, state)
  await until('A to end its transaction', () => 'A' in state.committed)
  if (!control) await until('B to process the partition', () => 'B' in state.committed)
  else await sleep(5000)             // B joined after A's commit: it starts at A's committed offset
  const values = await readCommitted(kafka)
  for (const p of [a, b]) {
    await p.consumer.disconnect()
    await p.producer.disconnect()
  }
  await admin.disconnect()

  const counts = {}
  for (const v of values) counts[v] = (counts[v] || 0) + 1
  const twice = Object.entries(counts).filter(([, n]) => n > 1).map(([v]) => v)
  console.log(`a read_committed reader of ${output} read ${values.length} outputs for ${Object.keys(counts).length} inputs`)
  if (twice.length) {
    console.log(`input ${twice[0]} has ${counts[twice[0]]} committed outputs` +
                (twice.length > 1 ? ` (and ${twice.length - 1} more inputs the same)` : ''))
    console.log(`SYMPTOM: ${twice.length} inputs processed twice: A committed its transaction's offsets after it ` +
                `had left the group (no generation in TxnOffsetCommit, KIP-447)`)
    return 1
  }
  console.log(`not seen: every input has one committed output (A's commit ${state.committed.A ? 'came first' : 'was refused'})`)
  return 0
}

main().then(code => process.exit(code), err => {
  console.error(`the run failed: ${err && err.stack || err}`)
  process.exit(2)
})
