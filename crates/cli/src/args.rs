//! Command-line arguments shared by several subcommands.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use psikit_protocols::common::connect::{ClientTlsFiles, ServerTlsFiles};
use psikit_protocols::common::Limits;
use psikit_protocols::io::{Column, KeySpec, Normalize};

/// How to read items from a CSV file.
#[derive(Args, Clone, Debug)]
pub struct CsvArgs {
    /// Key column(s): a header name or #N (0-based index). Repeat or separate
    /// with commas for a composite key. Both parties must use the same
    /// number of columns and the same normalisation.
    #[arg(long = "key", short = 'k', required = true, value_delimiter = ',')]
    pub key: Vec<String>,
    /// Normalisation applied to key fields, comma-separated from: trim,
    /// lower, nfc, collapse, digits.
    #[arg(long, default_value = "trim")]
    pub normalize: String,
    /// The file has no header row (select columns with #N).
    #[arg(long)]
    pub no_header: bool,
    /// Field delimiter (one byte, e.g. ',' or 'tab').
    #[arg(long, default_value = ",")]
    pub delimiter: String,
}

impl CsvArgs {
    pub fn spec(&self) -> Result<KeySpec> {
        let columns = self
            .key
            .iter()
            .map(|c| Column::parse(c))
            .collect::<Result<Vec<_>, _>>()?;
        let mut spec = KeySpec::new(columns);
        spec.normalize = Normalize::parse(&self.normalize)?;
        spec.has_headers = !self.no_header;
        spec.delimiter = match self.delimiter.as_str() {
            "tab" | "\\t" => b'\t',
            d if d.len() == 1 => d.as_bytes()[0],
            d => anyhow::bail!("delimiter must be one byte, got {d:?}"),
        };
        Ok(spec)
    }
}

/// Network limits of a client or server.
/// `--json`, on every command that prints a result or a summary.
#[derive(Args, Clone, Copy, Debug, Default)]
pub struct JsonArgs {
    /// Print the result as one JSON object on stdout (the lines for
    /// people go to stderr).
    #[arg(long)]
    pub json: bool,
}

impl JsonArgs {
    pub fn say(self) -> crate::report::Say {
        crate::report::Say::new(self.json)
    }
}

#[derive(Args, Clone, Debug, serde::Serialize)]
pub struct NetArgs {
    /// Seconds to wait for a message before giving up.
    #[arg(long, default_value_t = 60)]
    pub timeout_secs: u64,
    /// Largest single message accepted, in MiB.
    #[arg(long, default_value_t = 16)]
    pub max_message_mib: u32,
}

impl NetArgs {
    pub fn limits(&self) -> Result<Limits> {
        let bytes = self
            .max_message_mib
            .checked_mul(1 << 20)
            .context("--max-message-mib is too large")?;
        Ok(Limits {
            max_frame_bytes: bytes,
            read_timeout: Duration::from_secs(self.timeout_secs),
            write_timeout: Duration::from_secs(self.timeout_secs),
        })
    }
}

/// TLS settings of a client.
#[derive(Args, Clone, Debug, Default)]
pub struct ClientTlsArgs {
    /// Use TLS, trusting server certificates issued by this CA (PEM).
    #[arg(long)]
    pub tls_ca: Option<PathBuf>,
    /// Name expected in the server certificate (default: the host).
    #[arg(long, requires = "tls_ca")]
    pub tls_server_name: Option<String>,
    /// Client certificate (PEM), for servers that require mutual TLS.
    #[arg(long, requires_all = ["tls_ca", "tls_client_key"])]
    pub tls_client_cert: Option<PathBuf>,
    /// Client private key (PEM).
    #[arg(long, requires = "tls_client_cert")]
    pub tls_client_key: Option<PathBuf>,
}

impl ClientTlsArgs {
    pub fn files(&self) -> Option<ClientTlsFiles> {
        let ca = self.tls_ca.clone()?;
        Some(ClientTlsFiles {
            server_ca: ca,
            server_name: self.tls_server_name.clone(),
            client_cert: self
                .tls_client_cert
                .clone()
                .zip(self.tls_client_key.clone()),
        })
    }
}

/// TLS settings of a server.
#[derive(Args, Clone, Debug, Default, serde::Serialize)]
pub struct ServerTlsArgs {
    /// Serve TLS with this certificate chain (PEM).
    #[arg(long, requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// Private key of the certificate (PEM).
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Require client certificates issued by this CA (mutual TLS).
    #[arg(long, requires = "tls_cert")]
    pub tls_client_ca: Option<PathBuf>,
}

impl ServerTlsArgs {
    pub fn files(&self) -> Option<ServerTlsFiles> {
        Some(ServerTlsFiles {
            cert_chain: self.tls_cert.clone()?,
            private_key: self.tls_key.clone()?,
            client_ca: self.tls_client_ca.clone(),
        })
    }
}
