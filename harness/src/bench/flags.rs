//! Which `bench` flags each scenario reads: flags a scenario would ignore are refused before
//! anything runs, naming who uses them (`bench decode --k 4`), and so are `memra serve`'s own
//! flags where the scenario does not read them (`bench decode --max-running 8`).

use super::{BenchArgs, Scenario};
use anyhow::{bail, Result};

/// The scenarios each scenario-specific flag of [`BenchArgs`] applies to, by clap argument id
/// (the field name). Flags not listed (model, reps, warm-up, out, compare) apply to all.
const SCENARIO_FLAGS: &[(&str, &[Scenario])] = &[
    ("batch", &[Scenario::Decode]),
    ("depth", &[Scenario::Decode]),
    (
        "new_tokens",
        &[Scenario::Decode, Scenario::Serve, Scenario::Spec],
    ),
    ("prompt_len", &[Scenario::Ttft, Scenario::Prefix]),
    ("suffix_len", &[Scenario::Prefix]),
    ("seed", &[Scenario::Serve, Scenario::Prefix]),
    ("concurrency", &[Scenario::Serve]),
    ("rate", &[Scenario::Serve]),
    ("requests", &[Scenario::Serve]),
    ("duration", &[Scenario::Serve]),
    ("input_len", &[Scenario::Serve]),
    ("prompt_text", &[Scenario::Serve]),
    ("class", &[Scenario::Spec]),
    ("prompts_dir", &[Scenario::Spec]),
    ("method", &[Scenario::Spec]),
    ("k", &[Scenario::Spec]),
    ("stop_at_eos", &[Scenario::Spec]),
    ("vs", &[Scenario::Decode, Scenario::Ttft]),
    ("llama_bench", &[Scenario::Decode, Scenario::Ttft]),
    ("rounds", &[Scenario::Decode, Scenario::Ttft]),
];

/// Refuses flags given on the command line (`m`: the `bench` subcommand's matches) that the
/// named scenario would ignore, such as `bench decode --k 4`, naming the scenarios that use
/// them. Under `--compare` nothing is checked: REF's cells decide, and its help says which
/// flags it does not use.
///
/// # Errors
/// The first such flag, as "`--k` is not used by `bench decode` (it applies to: spec)".
pub fn check_scenario_flags(args: &BenchArgs, m: &clap::ArgMatches) -> Result<()> {
    let Some(scenario) = args.scenario.filter(|_| args.compare.is_none()) else {
        return Ok(());
    };
    for (id, used_by) in SCENARIO_FLAGS {
        let given = matches!(
            m.value_source(id),
            Some(clap::parser::ValueSource::CommandLine)
        );
        if given && !used_by.contains(&scenario) {
            let names: Vec<&str> = used_by.iter().map(|s| s.name()).collect();
            bail!(
                "`--{}` is not used by `bench {}` (it applies to: {})",
                id.replace('_', "-"),
                scenario.name(),
                names.join(", ")
            );
        }
    }
    Ok(())
}

/// The `memra serve` flags (`ConfigArgs::serve_flags`) each scenario reads: serve passes its
/// config to the child server, but binds 127.0.0.1 on a free port without API keys; spec and
/// prefix run the scheduler with serve's limits (and spec a `--draft-model` for `--method
/// draft`); decode and ttft drive the engine directly.
const SERVE_FLAGS_USED: &[(Scenario, &[&str])] = &[
    (Scenario::Decode, &[]),
    (Scenario::Ttft, &[]),
    (
        Scenario::Serve,
        &[
            "--max-batch-tokens",
            "--max-running",
            "--queue-capacity",
            "--context-len",
            "--draft-model",
            "--speculative",
            "--speculative-k",
            "--keepalive-secs",
            "--drain-secs",
        ],
    ),
    (
        Scenario::Spec,
        &["--max-batch-tokens", "--max-running", "--draft-model"],
    ),
    (Scenario::Prefix, &["--max-batch-tokens", "--max-running"]),
];

/// Refuses `memra serve` flags (`given`, as `ConfigArgs::serve_flags` lists them) that the named
/// scenario ignores, such as `bench decode --max-running 8` or `bench serve --port 9000` (the
/// child server binds a free port). Under `--compare` or with no scenario nothing is checked:
/// REF's cells decide.
///
/// # Errors
/// The ignored flags, as "`--port` is not used by `bench serve` ...".
pub fn check_serve_flags(args: &BenchArgs, given: &[&str]) -> Result<()> {
    let Some(scenario) = args.scenario.filter(|_| args.compare.is_none()) else {
        return Ok(());
    };
    let used = SERVE_FLAGS_USED
        .iter()
        .find(|(s, _)| *s == scenario)
        .map_or(&[][..], |(_, f)| *f);
    let unused: Vec<&str> = given
        .iter()
        .copied()
        .filter(|f| !used.contains(f))
        .collect();
    if unused.is_empty() {
        return Ok(());
    }
    let what = match scenario {
        Scenario::Serve => "the child server binds 127.0.0.1 on a free port without API keys",
        Scenario::Spec => "it does not run `memra serve`; its drafts are set by --method and --k",
        _ => "it does not run `memra serve`",
    };
    bail!(
        "{} {} not used by `bench {}` ({what})",
        unused.join(", "),
        if unused.len() == 1 { "is" } else { "are" },
        scenario.name()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::ValueEnum;

    /// Serve flags a scenario ignores are refused, the ones it reads pass, and `--compare`
    /// or no scenario checks nothing.
    #[test]
    fn serve_flags_by_scenario() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            bench: BenchArgs,
        }
        let args = |s: Option<Scenario>| {
            let mut a = Cli::try_parse_from(["bench", "decode", "--model", "m"])
                .unwrap()
                .bench;
            a.scenario = s;
            a
        };
        let e = check_serve_flags(&args(Some(Scenario::Decode)), &["--max-running"]).unwrap_err();
        assert!(
            format!("{e}").contains("--max-running is not used by `bench decode`"),
            "{e}"
        );
        let e = check_serve_flags(&args(Some(Scenario::Serve)), &["--port", "--host"]).unwrap_err();
        assert!(
            format!("{e}").contains("--port, --host are not used by `bench serve` (the child"),
            "{e}"
        );
        check_serve_flags(
            &args(Some(Scenario::Serve)),
            &["--max-running", "--speculative"],
        )
        .unwrap();
        check_serve_flags(&args(Some(Scenario::Spec)), &["--draft-model"]).unwrap();
        assert!(check_serve_flags(&args(Some(Scenario::Prefix)), &["--draft-model"]).is_err());
        assert!(check_serve_flags(&args(Some(Scenario::Ttft)), &["--speculative"]).is_err());
        let e = check_serve_flags(&args(Some(Scenario::Spec)), &["--speculative-k"]).unwrap_err();
        assert!(format!("{e}").contains("set by --method and --k"), "{e}");
        check_serve_flags(&args(None), &["--port"]).unwrap();
        let mut cmp = args(Some(Scenario::Decode));
        cmp.compare = Some("ref.jsonl".into());
        check_serve_flags(&cmp, &["--port"]).unwrap();
        // Every scenario has an entry, and every flag named is one serve_flags can report.
        let all = crate::config::ConfigArgs {
            host: Some(String::new()),
            port: Some(0),
            max_batch_tokens: Some(1),
            max_running: Some(1),
            queue_capacity: Some(1),
            context_len: Some(0),
            keyring: Some("k".into()),
            draft_model: Some(String::new()),
            speculative: Some(String::new()),
            speculative_k: Some(1),
            keepalive_secs: Some(1),
            drain_secs: Some(1),
            ..Default::default()
        }
        .serve_flags();
        for s in Scenario::value_variants() {
            let (_, used) = SERVE_FLAGS_USED
                .iter()
                .find(|(x, _)| x == s)
                .expect("scenario");
            for f in *used {
                assert!(all.contains(f), "{f}");
            }
        }
    }

    /// Every id in SCENARIO_FLAGS is an argument of `bench` (a renamed field would otherwise
    /// drop out of the check silently), and no listed flag is one every scenario uses.
    #[test]
    fn scenario_flags_name_bench_arguments() {
        let cmd = <BenchArgs as clap::Args>::augment_args(clap::Command::new("bench"));
        for (id, used_by) in SCENARIO_FLAGS {
            assert!(
                cmd.get_arguments().any(|a| a.get_id() == *id),
                "{id} is not an argument of bench"
            );
            assert!(used_by.len() < Scenario::value_variants().len(), "{id}");
        }
    }
}
