// The connection's security, from the environment, so the same driver runs over any
// listener of a broker (as interop/go/security.go does for franz-go):
//
//   STRAND_SECURITY_PROTOCOL  PLAINTEXT (default), SSL, SASL_PLAINTEXT or SASL_SSL
//   STRAND_SSL_CA             PEM file of the CA the broker's certificate comes from
//   STRAND_SSL_CERT, STRAND_SSL_KEY  the client's certificate and unencrypted key
//   STRAND_SASL_MECHANISM     PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512
//   STRAND_SASL_USER, STRAND_SASL_PASSWORD
'use strict'

const fs = require('fs')

function securityOptions(env = process.env) {
  const protocol = (env.STRAND_SECURITY_PROTOCOL || 'PLAINTEXT').toUpperCase()
  const options = {}
  if (protocol.includes('SSL')) {
    options.ssl = {}
    if (env.STRAND_SSL_CA) options.ssl.ca = [fs.readFileSync(env.STRAND_SSL_CA)]
    if (env.STRAND_SSL_CERT) {
      options.ssl.cert = fs.readFileSync(env.STRAND_SSL_CERT)
      options.ssl.key = fs.readFileSync(env.STRAND_SSL_KEY)
    }
  }
  if (protocol.startsWith('SASL')) {
    options.sasl = {
      mechanism: (env.STRAND_SASL_MECHANISM || 'PLAIN').toLowerCase(),
      username: env.STRAND_SASL_USER,
      password: env.STRAND_SASL_PASSWORD,
    }
  }
  return options
}

module.exports = { securityOptions }
