"""Statistics of the capability track: noise bands, capability reports and release decisions.

Pure typed Python over pandas/numpy/scipy (docs/methods.md): no Dagster, no DuckDB, no litellm.
Inputs are verdict frames of one build under one judge version (see `validate_verdicts`).
"""

from ._agreement import (
    AGREEMENT_LEVEL,
    AGREEMENT_N_BOOT,
    AGREEMENT_SEED,
    AgreementInterval,
    cluster_bootstrap_alpha,
)
from ._aa import AA_REPLICATIONS, AA_SEED, AARates, aa_rates, binomial_draws, chi_square_variance_draws
from ._bootstrap import SCIPY_BCA_MAX_N, Interval, mean_interval, quantile_interval
from ._calibration import (
    CALIBRATION_COLUMNS,
    MIN_SCENARIOS,
    Calibration,
    CalibrationFrameError,
    calibrate,
    krippendorff_alpha_interval,
)
from ._compare import (
    SCENARIO_PLOT_COLUMNS,
    CapabilityReport,
    CrossJudgeVersionError,
    ReportVerdict,
    compare,
)
from ._decision import EXIT_CODES, Decision, ReleaseDecision, decide, exit_code
from ._evidence import CheckOutcome, CheckSuiteEvidence, Evidence, Reason, Severity
from ._findings import Finding, FindingVerdict
from ._frame import COLUMNS, VerdictFrameError, release_invariant, scenario_table, validate_verdicts
from ._intervals import (
    SuiteIntervals,
    pass_hat_k,
    pass_rate_intervals,
    proportion_interval,
    suite_intervals,
    suite_mean_interval,
)
from ._noise import (
    NoiseBand,
    between_build_variance,
    noise_band,
)
from ._plot import SCORE_RANGE, clipped_band, plot_report
from ._reliability import Reliability, reliability, reliability_markdown
from ._rules import (
    BinaryTest,
    Budget,
    Moments,
    binary_drop_p,
    binary_repeats,
    chi_bar_sf,
    concentrated_test,
    evaluate,
    exact_separation_p,
    holm_blocks,
    holm_inputs,
    mean_rule_p,
    mean_test,
    moderated_prior,
    pass_fail_scenarios,
    scenario_tests,
    weighted_holm,
)
from ._summary import summary_markdown

__all__ = [
    "AGREEMENT_LEVEL",
    "AGREEMENT_N_BOOT",
    "AGREEMENT_SEED",
    "AgreementInterval",
    "cluster_bootstrap_alpha",
    "Reliability",
    "reliability",
    "reliability_markdown",
    "AA_REPLICATIONS",
    "AA_SEED",
    "AARates",
    "BinaryTest",
    "SuiteIntervals",
    "pass_hat_k",
    "pass_rate_intervals",
    "proportion_interval",
    "suite_intervals",
    "suite_mean_interval",
    "Budget",
    "binary_repeats",
    "binary_drop_p",
    "pass_fail_scenarios",
    "MIN_SCENARIOS",
    "Moments",
    "aa_rates",
    "binomial_draws",
    "chi_square_variance_draws",
    "between_build_variance",
    "chi_bar_sf",
    "concentrated_test",
    "evaluate",
    "holm_blocks",
    "holm_inputs",
    "mean_rule_p",
    "mean_test",
    "scenario_tests",
    "moderated_prior",
    "release_invariant",
    "weighted_holm",
    "CALIBRATION_COLUMNS",
    "COLUMNS",
    "EXIT_CODES",
    "SCENARIO_PLOT_COLUMNS",
    "SCIPY_BCA_MAX_N",
    "Calibration",
    "CalibrationFrameError",
    "CapabilityReport",
    "CheckOutcome",
    "CheckSuiteEvidence",
    "CrossJudgeVersionError",
    "Decision",
    "Evidence",
    "Finding",
    "Interval",
    "NoiseBand",
    "Reason",
    "ReleaseDecision",
    "ReportVerdict",
    "Severity",
    "FindingVerdict",
    "VerdictFrameError",
    "calibrate",
    "compare",
    "decide",
    "exact_separation_p",
    "exit_code",
    "krippendorff_alpha_interval",
    "mean_interval",
    "noise_band",
    "plot_report",
    "SCORE_RANGE",
    "clipped_band",
    "quantile_interval",
    "scenario_table",
    "summary_markdown",
    "validate_verdicts",
]
