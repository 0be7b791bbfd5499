//! The audit log: one JSON line per decision.

use crate::decision::{Conductor, Grant, Refused};
use time::OffsetDateTime;

/// Renders a decision as one JSON line.
pub fn decision_line(now: OffsetDateTime, certname: &str, outcome: Result<&Grant, &Refused>, source: &str) -> String {
    decision_value(now, certname, outcome, source).to_string()
}

/// [`decision_line`] as JSON, for a caller that adds a field (the serial about to be issued).
pub fn decision_value(
    now: OffsetDateTime,
    certname: &str,
    outcome: Result<&Grant, &Refused>,
    source: &str,
) -> serde_json::Value {
    let time = crate::encoding::time::format_rfc3339(now);
    let (verdict, conductor, reasons): (&str, Option<&Conductor>, Vec<serde_json::Value>) = match outcome {
        Ok(g) => ("granted", Some(g.conductor()), Vec::new()),
        Err(r) => (
            "refused",
            r.conductor.as_ref(),
            r.reasons.iter().map(|x| serde_json::json!({"code": x.code(), "message": x.to_string()})).collect(),
        ),
    };
    serde_json::json!({
        "time": time,
        "event": "decision",
        "source": source,
        "certname": certname,
        "verdict": verdict,
        "conductor": conductor,
        "reasons": reasons,
    })
}
