//! The sample workflow definitions and rules shipped in `workflows/`, embedded so `init` can install
//! them without the source tree.

/// `(file name, content)` of each sample definition (`conductor/workflows/`).
pub(crate) const SAMPLE_WORKFLOWS: [(&str, &str); 5] = [
    (
        "deploy-feature.yaml",
        include_str!("../../../../workflows/deploy-feature.yaml"),
    ),
    (
        "bug-fix.yaml",
        include_str!("../../../../workflows/bug-fix.yaml"),
    ),
    (
        "morning-briefing.yaml",
        include_str!("../../../../workflows/morning-briefing.yaml"),
    ),
    (
        "cross-pantheon-deploy.yaml",
        include_str!("../../../../workflows/cross-pantheon-deploy.yaml"),
    ),
    (
        "example-research-build.yaml",
        include_str!("../../../../workflows/example-research-build.yaml"),
    ),
];

/// `(file name, content)` of each sample rules file (`conductor/rules/`).
pub(crate) const SAMPLE_RULES: [(&str, &str); 3] = [
    (
        "10-research-to-build.yaml",
        include_str!("../../../../workflows/rules/10-research-to-build.yaml"),
    ),
    (
        "20-guarded.yaml",
        include_str!("../../../../workflows/rules/20-guarded.yaml"),
    ),
    (
        "90-log-only.yaml",
        include_str!("../../../../workflows/rules/90-log-only.yaml"),
    ),
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conductor::{Conductor, load_definitions, load_rules};
    use crate::store::Root;

    #[test]
    fn every_sample_loads_after_init() {
        let dir = tempfile::tempdir().unwrap();
        let c = Conductor::new(Root::at(dir.path()));
        c.init().unwrap();
        let (defs, errors) = load_definitions(c.root());
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(defs.len(), SAMPLE_WORKFLOWS.len());
        assert!(
            defs.iter()
                .any(|d| d.steps.iter().any(|s| s.approval_required))
        );
        let (rules, errors) = load_rules(c.root());
        assert!(errors.is_empty(), "{errors:?}");
        assert!(rules.len() >= 4);
    }
}
