//! `https://` targets: rustls (with the *ring* provider) between the engine's hot
//! connections and the driver. rustls is used sans-I/O: request bytes go into the session's
//! plaintext writer and come out as TLS records for the driver to send; received bytes go
//! into the session and come out as plaintext for the response reader. The handshake runs
//! on the first request's send (rustls holds the request until the session is up), so the
//! first latency on a connection includes it, as its connect does.
//!
//! Certificates are checked against the bundled web roots (webpki-roots) and `--cacert`'s
//! PEM file; `--insecure` accepts any certificate (signatures of the handshake are still
//! checked, so the session is real TLS). Cold connections to an `https://` target connect
//! and hold the socket without a handshake (idle mode only).

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::sync::Arc;

use coldwire_io::{Chunk, ConnectionId, Driver, Flush};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    ClientConfig, ClientConnection, DigitallySignedStruct, RootCertStore, SignatureScheme,
};

use crate::config::LoadConfig;
use crate::engine::{Engine, Slot};
use crate::error::BenchError;
use crate::recorder::ErrorKind;

/// The TLS client settings of a run and the server name of every `https://` endpoint.
pub struct TlsClient {
    config: Arc<ClientConfig>,
    names: Vec<(SocketAddr, ServerName<'static>)>,
}

impl TlsClient {
    /// Settings for `load`'s `https://` targets (`None` when there is none).
    pub fn for_load(load: &LoadConfig) -> Result<Option<TlsClient>, BenchError> {
        let secure: Vec<_> = load.targets.iter().filter(|target| target.tls).collect();
        if secure.is_empty() {
            return Ok(None);
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|error| BenchError::Tls(error.to_string()))?;
        let config = if load.insecure {
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AcceptAnyCertificate {
                    algorithms: provider.signature_verification_algorithms,
                }))
                .with_no_client_auth()
        } else {
            let mut roots =
                RootCertStore::from_iter(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
            if let Some(path) = &load.ca_file {
                let certificates = CertificateDer::pem_file_iter(path)
                    .and_then(|certificates| certificates.collect::<Result<Vec<_>, _>>())
                    .map_err(|error| {
                        BenchError::Tls(format!(
                            "cannot read CA certificates from {}: {error} — give a PEM file",
                            path.display()
                        ))
                    })?;
                if certificates.is_empty() {
                    return Err(BenchError::Tls(format!(
                        "{} holds no PEM certificate (-----BEGIN CERTIFICATE-----)",
                        path.display()
                    )));
                }
                let (_, ignored) = roots.add_parsable_certificates(certificates);
                if ignored > 0 {
                    return Err(BenchError::Tls(format!(
                        "{ignored} certificate(s) of {} could not be parsed",
                        path.display()
                    )));
                }
            }
            builder.with_root_certificates(roots).with_no_client_auth()
        };
        let mut names = Vec::new();
        for target in secure {
            let name = ServerName::try_from(target.host.clone()).map_err(|_| {
                BenchError::Tls(format!("`{}` cannot be a TLS server name", target.host))
            })?;
            names.push((target.resolve()?, name));
        }
        Ok(Some(TlsClient {
            config: Arc::new(config),
            names,
        }))
    }

    /// A new session for a connection to `address`, if it is an `https://` endpoint.
    pub fn connection(
        &self,
        address: SocketAddr,
    ) -> Option<Result<ClientConnection, rustls::Error>> {
        let (_, name) = self.names.iter().find(|(known, _)| *known == address)?;
        Some(
            ClientConnection::new(self.config.clone(), name.clone()).map(|mut connection| {
                // A request body larger than rustls' default buffer waits for the handshake.
                connection.set_buffer_limit(None);
                connection
            }),
        )
    }
}

/// `--insecure`: any certificate, any name; the handshake's signatures are still verified
/// (with the provider's algorithms), so a session is established only with the key holder.
#[derive(Debug)]
struct AcceptAnyCertificate {
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for AcceptAnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        certificate: &CertificateDer<'_>,
        signature: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, certificate, signature, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        certificate: &CertificateDer<'_>,
        signature: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, certificate, signature, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// Why a TLS connection failed: a socket error (with its errno) or a TLS error (its text).
pub(crate) enum TlsFailure {
    Socket(std::io::Error),
    Tls(String),
}

impl<D: Driver> Engine<D> {
    fn session(&mut self, id: ConnectionId) -> Option<&mut ClientConnection> {
        match self.slots.get_mut(id.index()) {
            Some(Slot::Hot(hot)) if hot.id == id => hot.tls.as_deref_mut(),
            _ => None,
        }
    }

    /// Encrypts `plaintext` (held by rustls until the handshake is done) and sends what the
    /// session has to send.
    pub(crate) fn tls_send(
        &mut self,
        id: ConnectionId,
        plaintext: &[u8],
    ) -> Result<(), TlsFailure> {
        if let Some(session) = self.session(id) {
            session
                .writer()
                .write_all(plaintext)
                .map_err(|error| TlsFailure::Tls(error.to_string()))?;
        }
        self.tls_flush(id)
    }

    /// Sends the TLS records the session has ready (handshake messages, requests).
    fn tls_flush(&mut self, id: ConnectionId) -> Result<(), TlsFailure> {
        let mut records = Vec::new();
        if let Some(session) = self.session(id) {
            while session.wants_write() {
                if let Err(error) = session.write_tls(&mut records) {
                    return Err(TlsFailure::Tls(error.to_string()));
                }
            }
        }
        if records.is_empty() {
            return Ok(());
        }
        self.driver.send(id, Chunk::Owned(records));
        match self.driver.flush(id) {
            Flush::Failed(error) => Err(TlsFailure::Socket(error)),
            _ => Ok(()),
        }
    }

    /// Feeds received TLS records to the session; returns the plaintext they carried
    /// (empty for handshake messages and session tickets) after sending any answer.
    pub(crate) fn tls_receive(
        &mut self,
        id: ConnectionId,
        mut received: &[u8],
    ) -> Result<Vec<u8>, TlsFailure> {
        let mut plaintext = Vec::new();
        if let Some(session) = self.session(id) {
            while !received.is_empty() {
                session
                    .read_tls(&mut received)
                    .map_err(|error| TlsFailure::Tls(error.to_string()))?;
                let state = session
                    .process_new_packets()
                    .map_err(|error| TlsFailure::Tls(error.to_string()))?;
                let mut available = state.plaintext_bytes_to_read();
                while available > 0 {
                    let start = plaintext.len();
                    plaintext.resize(start + available, 0);
                    let read = session
                        .reader()
                        .read(&mut plaintext[start..])
                        .map_err(|error| TlsFailure::Tls(error.to_string()))?;
                    plaintext.truncate(start + read);
                    if read == 0 {
                        break;
                    }
                    available -= read.min(available);
                }
            }
        }
        self.tls_flush(id)?;
        Ok(plaintext)
    }

    /// Ends a TLS connection's request with its cause.
    pub(crate) fn fail_tls(&mut self, id: ConnectionId, failure: TlsFailure) {
        match failure {
            TlsFailure::Socket(error) => {
                let kind = self.socket_error_kind(id, &error);
                self.fail_hot_with(id, kind, error.raw_os_error());
            }
            TlsFailure::Tls(detail) => self.fail_cause(id, ErrorKind::Tls, None, Some(&detail)),
        }
    }
}
