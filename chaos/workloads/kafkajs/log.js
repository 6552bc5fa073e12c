'use strict'
// The process's own log lines (stderr, which the runner appends to RUN/logs/<process>.log), each with a UTC
// time of day, and the usage error every bad option ends in (exit 2, before any operation: argparse's way).

const stamp = () => new Date().toISOString().slice(11, 23)

function logf(message) {
  process.stderr.write(`${stamp()} ${message}\n`)
}

function usage(message) {
  process.stderr.write(`txnlab-kafkajs: error: ${message}\n`)
  process.exit(2)
}

module.exports = { logf, usage, stamp }
