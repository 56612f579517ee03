//! How a failure reads, on both sides of the contract: the worker's `error`
//! message and memqual's `memqual: error: …` line are an error with its
//! causes joined by `": "`, as anyhow's `{:#}` joins them, except that a
//! cause the text so far already ends with is not said again. Many errors
//! put their source in their own message (`"{path}: {source}"`,
//! `"cannot read the model: {0}"` with `#[from]`) so that `{}` alone says
//! why; the chain printed whole would then say every reason twice.

/// `error` and each of its causes, a cause its predecessor's text already
/// ends with left out.
pub fn error_text(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(c) = cause {
        let said = c.to_string();
        if !text.ends_with(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
        cause = c.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::error_text;
    use std::io;

    #[derive(Debug, thiserror::Error)]
    enum Inner {
        #[error("{path}: {source}")]
        File { path: String, source: io::Error },
    }

    #[derive(Debug, thiserror::Error)]
    enum Outer {
        #[error("cannot read the model: {0}")]
        Read(#[from] Inner),
        #[error("cannot convert")]
        Convert(#[source] io::Error),
    }

    #[test]
    fn a_reason_already_in_the_message_is_said_once() {
        let e = Outer::from(Inner::File {
            path: "model.bin".into(),
            source: io::Error::other("disk gone"),
        });
        assert_eq!(
            error_text(&e),
            "cannot read the model: model.bin: disk gone"
        );
    }

    #[test]
    fn a_reason_the_message_leaves_out_is_added_like_anyhows_alternate_form() {
        let e = Outer::Convert(io::Error::other("disk gone"));
        assert_eq!(error_text(&e), "cannot convert: disk gone");
        let any = anyhow::Error::new(Outer::Convert(io::Error::other("disk gone")))
            .context("ct2 conversion of tiny.en");
        assert_eq!(format!("{any:#}"), error_text(any.as_ref()).as_str());
        assert_eq!(
            error_text(any.as_ref()),
            "ct2 conversion of tiny.en: cannot convert: disk gone"
        );
    }

    #[test]
    fn a_cause_that_only_appears_earlier_is_still_said() {
        #[derive(Debug, thiserror::Error)]
        #[error("disk gone while writing, then")]
        struct Later(#[source] io::Error);
        let e = Later(io::Error::other("disk gone"));
        assert_eq!(error_text(&e), "disk gone while writing, then: disk gone");
    }
}
