//! `--config FILE`: a command's flags read from a TOML file (`psikit
//! serve --config serve.toml`). Each key is a flag's long name
//! (`filter-state = "/srv/filter"`, `max-connections = 256`,
//! `he-no-cache = true`, `he-shard = ["a:7701", "b:7701"]`); a flag given
//! on the command line overrides the file's key. The file becomes
//! arguments before clap parses them, so the file and the flags go
//! through the same parser, defaults and checks; a key that is no flag of
//! the command is refused by name.

use std::ffi::OsString;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::{Arg, Command};

/// `args` with the keys of the `--config` file (if the subcommand named in
/// `args[1]` has one and it is given) inserted as flags after the
/// subcommand, except those the command line gives itself.
pub fn expand(command: &Command, args: Vec<OsString>) -> Result<Vec<OsString>> {
    let Some(sub) =
        (args.get(1).and_then(|a| a.to_str())).and_then(|name| command.find_subcommand(name))
    else {
        return Ok(args);
    };
    if !sub.get_arguments().any(|a| a.get_id() == "config") {
        return Ok(args);
    }
    let Some(path) = config_path(&args[2..]) else {
        return Ok(args);
    };
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read the config file {}", path.display()))?;
    let table: toml::Table =
        (text.parse()).with_context(|| format!("{}: not a valid TOML file", path.display()))?;
    let mut from_file = Vec::new();
    for (key, value) in &table {
        let arg = flag(sub, key).with_context(|| format!("{}", path.display()))?;
        if given(&args[2..], key) {
            continue;
        }
        let values = flag_values(arg, key, value).with_context(|| format!("{}", path.display()))?;
        from_file.extend(values);
    }
    let mut out = args[..2].to_vec();
    out.extend(from_file);
    out.extend_from_slice(&args[2..]);
    Ok(out)
}

/// The value of `--config PATH` or `--config=PATH` among `args`.
fn config_path(args: &[OsString]) -> Option<PathBuf> {
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--config" {
            return it.next().map(PathBuf::from);
        }
        if let Some(path) = a.to_str().and_then(|s| s.strip_prefix("--config=")) {
            return Some(PathBuf::from(path));
        }
    }
    None
}

/// Whether the command line gives `--key` itself.
fn given(args: &[OsString], key: &str) -> bool {
    let flag = format!("--{key}");
    let with_value = format!("--{key}=");
    (args.iter().filter_map(|a| a.to_str())).any(|a| a == flag || a.starts_with(&with_value))
}

/// The flag `key` names, or why there is none.
fn flag<'a>(sub: &'a Command, key: &str) -> Result<&'a Arg> {
    let found = (sub.get_arguments())
        .find(|a| a.get_long() == Some(key) && !matches!(key, "config" | "help"));
    if let Some(arg) = found {
        return Ok(arg);
    }
    let dashed = key.replace('_', "-");
    let hint = match sub.get_arguments().any(|a| a.get_long() == Some(&dashed)) {
        true => format!(" (did you mean `{dashed}`?)"),
        false => format!(" (the keys are `psikit {}`'s flags)", sub.get_name()),
    };
    bail!("unknown key `{key}`{hint}")
}

/// The command-line form of `key = value`.
fn flag_values(arg: &Arg, key: &str, value: &toml::Value) -> Result<Vec<OsString>> {
    let name = OsString::from(format!("--{key}"));
    if !arg.get_action().takes_values() {
        return match value {
            toml::Value::Boolean(true) => Ok(vec![name]),
            toml::Value::Boolean(false) => Ok(Vec::new()),
            _ => bail!("key `{key}` is a switch: give true or false"),
        };
    }
    let items = match value {
        toml::Value::Array(items) => items.iter().collect(),
        one => vec![one],
    };
    let mut out = Vec::new();
    for item in items {
        let text = match item {
            toml::Value::String(s) => s.clone(),
            toml::Value::Integer(i) => i.to_string(),
            toml::Value::Float(f) => f.to_string(),
            _ => bail!("key `{key}` takes a string or a number"),
        };
        out.push(name.clone());
        out.push(OsString::from(text));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{ArgAction, Command};

    fn command() -> Command {
        Command::new("psikit").subcommand(
            Command::new("serve")
                .arg(Arg::new("config").long("config"))
                .arg(Arg::new("listen").long("listen"))
                .arg(Arg::new("max-connections").long("max-connections"))
                .arg(
                    Arg::new("he-shard")
                        .long("he-shard")
                        .action(ArgAction::Append),
                )
                .arg(
                    Arg::new("he-no-cache")
                        .long("he-no-cache")
                        .action(ArgAction::SetTrue),
                ),
        )
    }

    fn expanded(toml: &str, extra: &[&str]) -> Result<Vec<String>> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("serve.toml");
        std::fs::write(&path, toml)?;
        let mut args: Vec<OsString> = ["psikit", "serve", "--config"].map(OsString::from).to_vec();
        args.push(path.into_os_string());
        args.extend(extra.iter().map(OsString::from));
        let out = expand(&command(), args)?;
        Ok(out[2..]
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect())
    }

    #[test]
    fn keys_become_flags_and_the_command_line_wins() {
        let toml = "listen = \"0.0.0.0:1\"\nmax-connections = 9\nhe-shard = [\"a:1\", \"b:2\"]\n\
                    he-no-cache = true\n";
        let got = expanded(toml, &["--listen", "127.0.0.1:2"]).expect("expand");
        // In the keys' order (TOML tables are sorted), before the command line.
        let want = "--he-no-cache --he-shard a:1 --he-shard b:2 --max-connections 9 --config";
        assert!(got.join(" ").starts_with(want), "{got:?}");
        assert!(!got.iter().any(|a| a == "0.0.0.0:1"), "{got:?}");
        let off = expanded("he-no-cache = false\n", &[]).expect("expand");
        assert!(!off.iter().any(|a| a == "--he-no-cache"), "{off:?}");
    }

    #[test]
    fn unknown_keys_and_wrong_types_are_refused_by_name() {
        let typo = expanded("max-conections = 3\n", &[]).unwrap_err();
        assert!(
            format!("{typo:#}").contains("unknown key `max-conections`"),
            "{typo:#}"
        );
        let snake = expanded("max_connections = 3\n", &[]).unwrap_err();
        assert!(
            format!("{snake:#}").contains("did you mean `max-connections`"),
            "{snake:#}"
        );
        let switch = expanded("he-no-cache = \"yes\"\n", &[]).unwrap_err();
        assert!(format!("{switch:#}").contains("is a switch"), "{switch:#}");
        let nested = expanded("[listen]\nport = 1\n", &[]).unwrap_err();
        assert!(
            format!("{nested:#}").contains("takes a string or a number"),
            "{nested:#}"
        );
        assert!(
            expanded("config = \"x\"\n", &[]).is_err(),
            "config is not a key"
        );
    }
}
