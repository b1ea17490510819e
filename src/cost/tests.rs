use super::*;
use crate::config::{entry_problem, lookup, shipped_as_of, shipped_prices, PriceEntry};

fn entry(provider: &str, model: &str, input: f64, output: f64) -> PriceEntry {
    PriceEntry {
        provider: provider.into(),
        model: model.into(),
        input,
        output,
        cache_write: None,
        cache_read: None,
    }
}

#[test]
fn the_shipped_table_parses_is_dated_and_every_row_is_valid() {
    assert!(shipped_prices().len() > 20, "{}", shipped_prices().len());
    let date = shipped_as_of();
    assert_eq!(date.len(), 10, "{date}");
    assert!(
        jiff::civil::Date::strptime("%Y-%m-%d", date).is_ok(),
        "{date}"
    );
    for row in shipped_prices() {
        assert_eq!(entry_problem(row), None, "{row:?}");
    }
}

#[test]
fn the_longest_prefix_wins_and_an_exact_name_beats_it() {
    let opus = |model| lookup(&[], "anthropic", "anthropic", model).expect("priced");
    assert_eq!(opus("claude-opus-4-20250514").input, 15.0);
    assert_eq!(opus("claude-opus-4-1-20250805").input, 15.0);
    assert_eq!(opus("claude-opus-4-5-20251101").input, 5.0);
    assert_eq!(opus("claude-opus-5-5").input, 4.0);
    assert_eq!(opus("claude-sonnet-4-5-20250929").cache_read, 0.3);
    let mine = [entry("openai", "gpt-5", 9.0, 9.0)];
    assert_eq!(
        lookup(&mine, "openai", "openai", "gpt-5").expect("p").input,
        9.0
    );
    assert_eq!(
        lookup(&mine, "openai", "openai", "gpt-5-mini")
            .expect("p")
            .input,
        0.25
    );
    assert_eq!(lookup(&[], "anthropic", "anthropic", "gpt-5"), None);
    assert_eq!(
        lookup(&[], "anthropic", "anthropic", "claude-unknown-9"),
        None
    );
}

#[test]
fn configuration_rows_win_and_an_entry_name_beats_its_kind() {
    let rows = [
        entry("openai", "gemini-*", 1.0, 1.0),
        entry("gemini", "gemini-*", 2.0, 2.0),
    ];
    // An entry named `gemini` of kind openai: its own rows first.
    let p = lookup(&rows, "gemini", "openai", "gemini-2.5-flash").expect("priced");
    assert_eq!((p.input, p.source), (2.0, PriceSource::Config));
    // Another entry of kind openai falls back to the kind's rows.
    let p = lookup(&rows, "vllm", "openai", "gemini-2.5-flash").expect("priced");
    assert_eq!(p.input, 1.0);
    // A configured row beats a shipped one even when the shipped pattern is longer.
    let rows = [entry("anthropic", "claude-*", 7.0, 7.0)];
    let p = lookup(&rows, "anthropic", "anthropic", "claude-haiku-4-5").expect("priced");
    assert_eq!(p.input, 7.0);
    // Local and scripted models cost nothing, and that is a known price.
    let p = lookup(&[], "local", "local", "smollm2-135m-instruct").expect("priced");
    assert_eq!((p.input, p.output), (0.0, 0.0));
}

#[test]
fn a_call_is_priced_by_kind_of_token() {
    let p = Price::of(
        &PriceEntry {
            cache_write: Some(3.75),
            cache_read: Some(0.3),
            ..entry("anthropic", "claude-sonnet-4*", 3.0, 15.0)
        },
        PriceSource::Shipped,
    );
    let usage = CallUsage {
        prompt_tokens: Some(10_000),
        completion_tokens: Some(1_000),
        cache_write_tokens: Some(2_000),
        cache_read_tokens: Some(7_000),
    };
    // 1000 × 3 + 2000 × 3.75 + 7000 × 0.3 + 1000 × 15 = 27 600 (µ$ per million) → $0.0276.
    assert_eq!(call_nanos(&p, &usage), Some(27_600_000));
    assert_eq!(usd(27_600_000), "$0.0276");
    // Unknown usage has no cost; unknown cache counts price every input token as input.
    assert_eq!(
        call_nanos(
            &p,
            &CallUsage {
                completion_tokens: None,
                ..usage
            }
        ),
        None
    );
    let plain = CallUsage {
        prompt_tokens: Some(1_000),
        completion_tokens: Some(0),
        ..CallUsage::default()
    };
    assert_eq!(call_nanos(&p, &plain), Some(3_000_000));
    // Cache counts past the prompt (a confused server) are cut at it.
    let odd = CallUsage {
        cache_read_tokens: Some(5_000),
        ..plain
    };
    assert_eq!(call_nanos(&p, &odd), Some(300_000));
    // A free model costs nothing, reported usage or not.
    let free = Price::of(&entry("local", "*", 0.0, 0.0), PriceSource::Shipped);
    assert_eq!(call_nanos(&free, &CallUsage::default()), Some(0));
    assert_eq!(usd(30), "$0.0000000");
    assert_eq!(usd(0), "$0.0000");
    assert_eq!(nanos_of_usd(0.25), 250_000_000);
}

#[test]
fn bad_entries_are_named() {
    assert!(entry_problem(&entry("", "m", 1.0, 1.0)).is_some());
    assert!(entry_problem(&entry("p", "a*b", 1.0, 1.0))
        .expect("star")
        .contains("may only end"));
    assert!(entry_problem(&entry("p", "m", -1.0, 1.0))
        .expect("negative")
        .contains("`input` is -1"));
    assert!(entry_problem(&entry("p", "m", 1.0, f64::NAN)).is_some());
    assert_eq!(entry_problem(&entry("p", "m*", 0.0, 0.0)), None);
}
