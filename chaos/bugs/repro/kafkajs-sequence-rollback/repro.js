// A standalone reproduction of KafkaJS 2.2.4 losing a committed transaction's records: a batch whose produce request
// was written but never answered (its connection ended: a leader that dies, a connection reset) is taken as not
// written, and its partition's sequence numbers are rolled back. When that send fails and the application aborts the
// transaction, as KafkaJS's documentation asks, the producer keeps its id, epoch and the rolled-back sequence (no
// epoch bump after a produce of unknown outcome, KIP-360). The next transaction's batch of as many records to that
// partition reuses the written batch's sequence: the broker takes it for a retry of the earlier batch, drops it and
// answers with the earlier batch's offset. KafkaJS reports success, the transaction commits, and its record is not
// in the log: a read_committed consumer never sees it.
// The reproduction brings the event about itself, on the client's side, through KafkaJS's own socketFactory option:
// while a transaction's send() runs, every connection to the partition's leader is ended right after a produce
// request is written (so the send's retries fail too and it rejects).
//
// Usage: node repro.js --brokers 127.0.0.1:9092[,...] [--tries 5] [--topic NAME]
// It creates the topic (3 partitions, replication factor min(3, brokers)). Exit 1: the symptom was seen (a committed
// record missing); 0: not seen; 2: the run itself failed.
'use strict'

const net = require('net')
const { Kafka, logLevel } = require('kafkajs')

function option(name, fallback) {
  const at = process.argv.indexOf(`--${name}`)
  return at > 0 && at + 1 < process.argv.length ? process.argv[at + 1] : fallback
}

const brokers = option('brokers', '127.0.0.1:9092').split(',')
const tries = Number(option('tries', '5'))
const topic = option('topic', `kafkajs-sequence-rollback-${Date.now()}`)

// the fault, by broker port: end the connection right after each produce request written to that broker (a Produce
// request's api key is 0: the int16 after the request's size)
const endAfterProduce = new Set()

function socketFactory({ host, port, ssl, onConnect }) {
  if (ssl) throw new Error('this reproduction speaks plaintext only')
  const socket = net.connect({ host, port }, onConnect)
  const write = socket.write.bind(socket)
  socket.write = (chunk, ...rest) => {
    const done = write(chunk, ...rest)
    if (endAfterProduce.has(port) && Buffer.isBuffer(chunk) && chunk.length >= 6 && chunk.readInt16BE(4) === 0) {
      setImmediate(() => {              // the peer's end of the connection, as when the broker goes away
        socket.emit('end')
        socket.destroy()
      })
    }
    return done
  }
  return socket
}

async function main() {
  const kafka = new Kafka({ clientId: 'kafkajs-sequence-rollback', brokers, socketFactory, logLevel: logLevel.NOTHING,
                            retry: { retries: 5, initialRetryTime: 100 } })
  const admin = kafka.admin()
  await admin.connect()
  const cluster = await admin.describeCluster()
  await admin.createTopics({
    topics: [{ topic, numPartitions: 3, replicationFactor: Math.min(3, cluster.brokers.length) }], waitForLeaders: true })
  const { topics } = await admin.fetchTopicMetadata({ topics: [topic] })
  const leader = topics[0].partitions.find(p => p.partitionId === 0).leader
  const port = cluster.brokers.find(b => b.nodeId === leader).port
  await admin.disconnect()
  console.log(`topic ${topic}: partition 0 led by broker ${leader}; its connections end after each produce while ` +
              'the first send of a try runs')

  const producer = kafka.producer({ transactionalId: `kafkajs-sequence-rollback-${Date.now()}`, idempotent: true,
                                    maxInFlightRequests: 1 })
  await producer.connect()
  const committed = []
  const controls = []         // the same transactions' records on a partition without the fault: read, or the check failed
  for (let t = 0; t < tries; t++) {
    const failed = await producer.transaction()
    endAfterProduce.add(port)
    try {
      await failed.send({ topic, messages: [{ partition: 0, value: `t${t}-aborted` }] })
      endAfterProduce.delete(port)
      await failed.abort()
      console.log(`try ${t}: the send went through after all (no unknown outcome); aborted`)
      continue
    } catch (e) {
      endAfterProduce.delete(port)
      await failed.abort()
      console.log(`try ${t}: send failed (${e.name}: ${e.message}); transaction aborted`)
    }
    const next = await producer.transaction()
    await next.send({ topic, messages: [{ partition: 0, value: `t${t}-committed` },
                                        { partition: 1, value: `t${t}-control` }] })
    await next.commit()
    committed.push(`t${t}-committed`)
    controls.push(`t${t}-control`)
    console.log(`try ${t}: the next transaction sent t${t}-committed (partition 0) and t${t}-control (partition 1) ` +
                'and committed')
  }
  await producer.disconnect()

  const seen = new Map()
  const consumer = kafka.consumer({ groupId: `${topic}-check`, readUncommitted: false })
  await consumer.connect()
  await consumer.subscribe({ topic, fromBeginning: true })
  const admin2 = kafka.admin()
  await admin2.connect()
  const end = Number((await admin2.fetchTopicOffsets(topic)).find(p => p.partition === 0).high)
  await admin2.disconnect()
  let last = -1
  await new Promise((resolve, reject) => {
    const deadline = setTimeout(() => reject(new Error('did not read partition 0 to its end within 60 s')), 60000)
    consumer.run({
      eachMessage: async ({ partition, message }) => {
        seen.set(message.value.toString(), `${partition}@${message.offset}`)
        if (partition === 0) last = Math.max(last, Number(message.offset))
      },
    })
    const poll = setInterval(() => {     // read_committed stops before the end's control records: settle on quiet
      const all = [...committed, ...controls].every(id => seen.has(id))
      if (all || (controls.every(id => seen.has(id)) && Date.now() - started > 15000)) {
        clearInterval(poll)
        clearTimeout(deadline)
        resolve()
      }
    }, 500)
    const started = Date.now()
  })
  await consumer.disconnect()
  const missing = committed.filter(id => !seen.has(id))
  console.log(`partition 0: ${end} offsets (each try: the aborted record and its marker, then the commit's marker, ` +
              `and the committed record if it was written); read_committed read ${seen.size - controls.length} ` +
              `records there (last offset ${last}), and all ${controls.length} control records of partition 1`)
  for (const id of missing) console.log(`record ${id} of a committed transaction is missing`)
  if (missing.length) {
    console.log(`SYMPTOM: ${missing.length} of ${committed.length} committed records missing for a read_committed consumer`)
    return 1
  }
  console.log(`not seen: each of the ${committed.length} committed records read`)
  return 0
}

main().then(code => process.exit(code), err => {
  console.error(`the run failed: ${err && err.stack || err}`)
  process.exit(2)
})
