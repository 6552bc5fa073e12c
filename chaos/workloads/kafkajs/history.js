'use strict'
// The run's history socket (docs/workload-protocol.md "The history socket"): one JSON operation per line,
// one invoke outstanding per logical process. Observations KafkaJS's events make while the process has an
// invoke outstanding (a rebalance in the middle of a transaction) wait for its completion: the history pairs
// an invoke with the process's next operation. Lines are written in order on one socket; close() ends it and
// waits until everything written has been handed to the kernel.

const net = require('net')
const { logf } = require('./log')

// process.hrtime.bigint() is libuv's uv_hrtime: clock_gettime(CLOCK_MONOTONIC) on Linux, the clock every
// process of the machine shares (Python's time.monotonic_ns, chaos/history.py).
const monotonicNs = () => process.hrtime.bigint()

class History {
  constructor(socket, runStartNs, processName) {
    this.socket = socket
    this.runStartNs = runStartNs
    this.process = processName
    this.outstanding = null // the process's open invoke: {f, value}
    this.waiting = [] // observations made while it was open: [f, value]
    this.closed = false
    socket.on('error', err => logf(`history socket: ${err.message}`))
  }

  static connect(path, runStartNs, processName) {
    return new Promise((resolve, reject) => {
      const socket = net.createConnection(path)
      const failed = err => reject(new Error(`history socket ${path}: ${err.message}`))
      socket.once('error', failed)
      socket.once('connect', () => {
        socket.removeListener('error', failed)
        resolve(new History(socket, runStartNs, processName))
      })
    })
  }

  write(type, f, value) {
    if (this.closed) {
      logf(`history closed: dropped ${type} ${f}`)
      return
    }
    // time is a BigInt (exact ns) and wall a float with 6 decimals, spliced in as JSON numbers; the rest is
    // JSON.stringify's.
    const time = (monotonicNs() - this.runStartNs).toString()
    const wall = Date.now() / 1000 // unix seconds (the wall clock as it is now, ms precision)
    const line = `{"time":${time},"wall":${wall.toFixed(6)},"process":${JSON.stringify(this.process)},` +
      `"type":${JSON.stringify(type)},"f":${JSON.stringify(f)},"value":${JSON.stringify(value)}}\n`
    this.socket.write(line)
  }

  // invoke records that the process is about to act.
  invoke(f, value) {
    this.outstanding = { f, value }
    this.write('invoke', f, value)
  }

  // complete records the outcome (ok, fail, info) of the open invoke, then what was observed meanwhile.
  complete(type, f, value) {
    this.outstanding = null
    this.write(type, f, value)
    this.flushWaiting()
  }

  // observe records an `ok` without an invoke, at once or, with an invoke open, right after its completion.
  observe(f, value) {
    if (this.outstanding) this.waiting.push([f, value])
    else this.write('ok', f, value)
  }

  flushWaiting() {
    const waiting = this.waiting
    this.waiting = []
    for (const [f, value] of waiting) this.write('ok', f, value)
  }

  // stalled completes the open invoke as info (its outcome is unknown) and records the stall.
  stalled(stall) {
    const open = this.outstanding
    if (open) {
      this.outstanding = null
      this.write('info', open.f, {
        ...open.value, stalled: stall.call,
        error: `stalled: ${stall.call} did not return in ${stall.seconds} s (its timeout ${stall.timeout_s} s)`,
      })
    }
    this.flushWaiting()
    this.write('ok', 'stall', stall)
  }

  // close writes what is still waiting, ends the socket and resolves once everything written has been
  // handed to the kernel ('finish'), or after timeoutMs.
  close(timeoutMs = 5000) {
    if (this.closed) return this.closing
    this.flushWaiting()
    this.closed = true
    this.closing = new Promise(resolve => {
      const timer = setTimeout(() => {
        logf('history socket: not flushed in time')
        resolve()
      }, timeoutMs)
      this.socket.end(() => {
        clearTimeout(timer)
        resolve()
      })
    })
    return this.closing
  }
}

module.exports = { History, monotonicNs }
