'use strict'
// The KafkaJS workloads of txnlab: a transactional producer and an exactly-once processor (a read_committed
// consumer and a transactional producer, the offsets sent in the transaction), speaking
// docs/workload-protocol.md. chaos/workloads/native.py execs `node main.js NAME ...` with the arguments
// `python -m chaos.workloads NAME --client kafkajs ...` was given and NODE_PATH at the installed kafkajs
// (cluster/lab/clients.py); the Kafka connection comes in TXNLAB_KAFKA_* variables, never on the command line.
// This file owns the arguments, the process's context (ids, seeded randomness, history, watchdog, stopping)
// and the dispatch to a workload.

const { History } = require('./history')
const { Watch } = require('./watch')
const { logf, usage } = require('./log')
const { seededRandom } = require('./records')

const INCARNATION_STRIDE = 1_000_000_000 // chaos/ids.py INCARNATION_STRIDE

// Options and their arity (-1: one or more), as argparse declares them (base.py, transactional.py, the workloads).
const COMMON = { '--socket': 1, '--run-start-ns': 1, '--run-tag': 1, '--process': 1, '--seed': 1, '--duration': 1,
  '--incarnation': 1 }
const TRANSACTIONAL = { '--transaction-timeout-ms': 1, '--request-timeout-s': 1, '--txn-id': 1, '--on-fenced': 1 }
const WORKLOAD_OPTIONS = {
  'txn-producer': { '--topics': 2, '--records': 1, '--abort-share': 1, '--rate': 1, '--size': 1, '--keys': 1 },
  processor: { '--inputs': -1, '--output': 1, '--group': 1, '--batch': 1, '--size': 1, '--group-protocol': 1 },
}

// Args are the options as given; a workload reads its own with the typed getters (a bad value: exit 2).
class Args {
  constructor(argv, own) {
    const arity = { ...COMMON, ...TRANSACTIONAL, ...own }
    this.values = {}
    for (let i = 0; i < argv.length;) {
      let name = argv[i++]
      const vals = []
      const inline = name.startsWith('--') && name.includes('=')
      if (inline) { // --name=value
        vals.push(name.slice(name.indexOf('=') + 1))
        name = name.slice(0, name.indexOf('='))
      }
      const n = Object.hasOwn(arity, name) ? arity[name] : undefined
      if (n === undefined) usage(`unrecognized arguments: ${argv[i - 1]}`)
      while (!inline && i < argv.length && (n < 0 || vals.length < n) && !(argv[i].startsWith('--') && argv[i].length > 2)) {
        vals.push(argv[i++])
      }
      if (!vals.length || (n > 0 && vals.length !== n)) {
        usage(`argument ${name}: expected ${n < 0 ? 'at least one argument' : `${n} argument${n > 1 ? 's' : ''}`}`)
      }
      this.values[name] = vals
    }
    for (const required of ['--socket', '--run-start-ns', '--run-tag', '--process']) {
      if (!(required in this.values)) usage(`the following arguments are required: ${required}`)
    }
  }

  str(name, def) {
    return name in this.values ? this.values[name][0] : def
  }

  list(name) {
    return this.values[name] || []
  }

  num(name, def) {
    if (!(name in this.values)) return def
    const v = this.values[name][0]
    const f = Number(v)
    if (v.trim() === '' || !Number.isFinite(f)) usage(`argument ${name}: invalid float value: '${v}'`)
    return f
  }

  integer(name, def) {
    if (!(name in this.values)) return def
    const v = this.values[name][0]
    if (!/^\s*[-+]?\d+\s*$/.test(v)) usage(`argument ${name}: invalid int value: '${v}'`)
    return parseInt(v, 10)
  }

  bigint(name) {
    const v = this.str(name, '')
    if (!/^\s*[-+]?\d+\s*$/.test(v)) usage(`argument ${name}: invalid int value: '${v}'`)
    return BigInt(v.trim())
  }
}

// Ctx is a workload process's view of its run (chaos/workloads/base.py WorkloadContext). Build it with
// newCtx once every option has been read (bad options exit 2 before the history is touched).
class Ctx {
  constructor(a) {
    this.runStartNs = a.bigint('--run-start-ns')
    this.runTag = a.str('--run-tag')
    this.process = a.str('--process')
    this.socketPath = a.str('--socket')
    const seed = a.integer('--seed', 0)
    this.rng = seededRandom(`${seed}/${this.process}`)
    this.firstAttempt = a.integer('--incarnation', 0) * INCARNATION_STRIDE
    this.duration = a.num('--duration', 0)
    this.requestTimeoutMs = Math.round(a.num('--request-timeout-s', 10) * 1000)
    this.stopped = false
    this.wakers = new Set()
  }

  async open() {
    try {
      this.history = await History.connect(this.socketPath, this.runStartNs, this.process)
    } catch (err) {
      logf(err.message)
      process.exit(1)
    }
    this.watch = new Watch(this.history)
    if (this.duration > 0) setTimeout(() => this.stop(), this.duration * 1000).unref()
    process.on('SIGTERM', () => this.stop())
    process.on('SIGINT', () => this.stop())
    return this
  }

  stop() {
    if (this.stopped) return
    this.stopped = true
    for (const wake of this.wakers) wake()
    this.wakers.clear()
  }

  stopping() {
    return this.stopped
  }

  // wait sleeps ms or until stopped (resolves true when stopped); ms Infinity: until stopped or wake().
  wait(ms) {
    if (this.stopped) return Promise.resolve(true)
    return new Promise(resolve => {
      const done = () => {
        clearTimeout(timer)
        this.wakers.delete(done)
        resolve(this.stopped)
      }
      const timer = Number.isFinite(ms) ? setTimeout(done, ms) : null
      this.wakers.add(done)
    })
  }

  // wake ends every wait early (without stopping).
  wake() {
    for (const w of [...this.wakers]) w()
  }

  // finish flushes the history and exits with code.
  async finish(code = 0) {
    await this.history.close()
    process.exit(code)
  }
}

let current = null // the process's context, once open (for a crash's flush)

async function newCtx(a) {
  current = await new Ctx(a).open()
  return current
}

process.on('unhandledRejection', err => logf(`unhandled rejection: ${err && err.stack ? err.stack : err}`))

function main() {
  const workload = process.argv[2]
  if (!workload) usage('usage: node main.js {txn-producer,processor} [options]')
  if (!Object.hasOwn(WORKLOAD_OPTIONS, workload)) usage(`unknown workload ${JSON.stringify(workload)}: kafkajs runs txn-producer and processor`)
  const a = new Args(process.argv.slice(3), WORKLOAD_OPTIONS[workload])
  const run = workload === 'txn-producer' ? require('./producer').runProducer : require('./processor').runProcessor
  run(a).catch(async err => {
    // A bug of this program, not an outcome: the open invoke stays open (the writer completes it as info).
    logf(`${workload} failed: ${err && err.stack ? err.stack : err}`)
    if (current) await current.history.close()
    process.exit(1)
  })
}

module.exports = { newCtx }

if (require.main === module) main()
