// A standalone reproduction of KafkaJS 2.2.4 writing a transaction's batch twice: send() retries while another
// broker's produce request is still in flight. One send() writes a record to a partition led by broker A and one to
// a partition led by broker B. The reproduction brings the triggering event about itself, on the client's side,
// through KafkaJS's own socketFactory option: B's produce response is held back for a moment (B slow to answer), and
// the connection to A is closed right after A's produce request is written (as when A dies or a connection resets).
// Promise.all in sendMessages rejects at A's failure while B's request is in flight; the retry sends B the same
// record again under B's lock, with the next sequence numbers, and the broker appends it a second time. The
// transaction commits; a read_committed consumer then reads that record twice.
//
// Usage: node repro.js --brokers 127.0.0.1:9092[,...] [--tries 5] [--hold-ms 2000] [--topic NAME]
// Needs a cluster of at least 2 brokers (the two partitions must have different leaders). It creates the topic
// (6 partitions, replication factor min(3, brokers)). Exit 1: the symptom was seen (a record read twice); 0: not
// seen; 2: the run itself failed.
'use strict'

const net = require('net')
const { Kafka, logLevel } = require('kafkajs')

function option(name, fallback) {
  const at = process.argv.indexOf(`--${name}`)
  return at > 0 && at + 1 < process.argv.length ? process.argv[at + 1] : fallback
}

const brokers = option('brokers', '127.0.0.1:9092').split(',')
const tries = Number(option('tries', '5'))
const holdMs = Number(option('hold-ms', '2000'))
const topic = option('topic', `kafkajs-retry-duplicates-${Date.now()}`)

// the faults, by broker port: hold that broker's responses for holdMs; close that broker's connection once, right
// after the next produce request written to it (a Produce request's api key is 0: the int16 after the size)
const hold = new Set()
const closeAfterProduce = new Set()

function socketFactory({ host, port, ssl, onConnect }) {
  if (ssl) throw new Error('this reproduction speaks plaintext only')
  const socket = net.connect({ host, port }, onConnect)
  const emit = socket.emit.bind(socket)
  socket.emit = (event, ...args) => {
    if (event === 'data' && hold.has(port)) {
      setTimeout(() => emit(event, ...args), holdMs)
      return true
    }
    return emit(event, ...args)
  }
  const write = socket.write.bind(socket)
  socket.write = (chunk, ...rest) => {
    const done = write(chunk, ...rest)
    if (closeAfterProduce.has(port) && Buffer.isBuffer(chunk) && chunk.length >= 6 && chunk.readInt16BE(4) === 0) {
      closeAfterProduce.delete(port)
      if (process.env.REPRO_DEBUG) console.log(`closing the connection to port ${port} after a produce`)
      setImmediate(() => {              // the peer's end of the connection, as when the broker goes away
        emit('end')
        socket.destroy()
      })
    }
    return done
  }
  return socket
}

async function main() {
  const kafka = new Kafka({ clientId: 'kafkajs-retry-duplicates', brokers, socketFactory, logLevel: logLevel.NOTHING })
  const admin = kafka.admin()
  await admin.connect()
  const cluster = await admin.describeCluster()
  if (cluster.brokers.length < 2) throw new Error('needs at least 2 brokers: the two partitions need different leaders')
  await admin.createTopics({
    topics: [{ topic, numPartitions: 6, replicationFactor: Math.min(3, cluster.brokers.length) }], waitForLeaders: true })
  const { topics } = await admin.fetchTopicMetadata({ topics: [topic] })
  const leaders = new Map(topics[0].partitions.map(p => [p.partitionId, p.leader]))
  const portOf = new Map(cluster.brokers.map(b => [b.nodeId, b.port]))
  const pa = [...leaders.keys()][0]
  const pb = [...leaders.keys()].find(p => leaders.get(p) !== leaders.get(pa))
  await admin.disconnect()
  const [portA, portB] = [portOf.get(leaders.get(pa)), portOf.get(leaders.get(pb))]
  console.log(`topic ${topic}: partition ${pa} led by broker ${leaders.get(pa)} (closed after its produce), ` +
              `partition ${pb} by broker ${leaders.get(pb)} (its answers held ${holdMs} ms)`)

  const producer = kafka.producer({ transactionalId: `kafkajs-retry-duplicates-${Date.now()}`, idempotent: true,
                                    maxInFlightRequests: 1 })
  await producer.connect()
  const sent = []
  for (let t = 0; t < tries; t++) {
    const txn = await producer.transaction()
    const ids = [`t${t}-a`, `t${t}-b`]
    hold.add(portB)
    closeAfterProduce.add(portA)
    try {
      await txn.send({ topic, messages: [{ partition: pa, value: ids[0] }, { partition: pb, value: ids[1] }] })
    } finally {
      hold.delete(portB)
      closeAfterProduce.delete(portA)
    }
    await txn.commit()
    sent.push(...ids)
    console.log(`transaction ${t}: sent ${ids.join(', ')} in one send(), committed`)
  }
  await producer.disconnect()

  const seen = new Map()
  const consumer = kafka.consumer({ groupId: `${topic}-check`, readUncommitted: false })
  await consumer.connect()
  await consumer.subscribe({ topic, fromBeginning: true })
  await new Promise((resolve, reject) => {
    const deadline = setTimeout(() => reject(new Error('did not read every committed record within 60 s')), 60000)
    let lastNew = Date.now()
    consumer.run({
      eachMessage: async ({ partition, message }) => {
        const id = message.value.toString()
        seen.set(id, [...(seen.get(id) || []), `${partition}@${message.offset}`])
        lastNew = Date.now()
      },
    })
    const poll = setInterval(() => {
      if (sent.every(id => seen.has(id)) && Date.now() - lastNew > 3000) {
        clearInterval(poll)
        clearTimeout(deadline)
        resolve()
      }
    }, 500)
  })
  await consumer.disconnect()
  const twice = sent.filter(id => seen.get(id).length > 1)
  for (const id of twice) console.log(`record ${id} read ${seen.get(id).length} times at ${seen.get(id).join(', ')}`)
  if (twice.length) {
    console.log(`SYMPTOM: ${twice.length} of ${sent.length} committed records read twice by a read_committed consumer`)
    return 1
  }
  console.log(`not seen: each of the ${sent.length} committed records read once`)
  return 0
}

main().then(code => process.exit(code), err => {
  console.error(`the run failed: ${err && err.stack || err}`)
  process.exit(2)
})
