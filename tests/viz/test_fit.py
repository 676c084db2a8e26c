"""The will-it-fit figure draws what the report holds: one bar per model and mesh, each device size named."""

from matplotlib.figure import Figure

from course_utils import draw_fit
from course_utils.memory.fit import Fit, FitReport


def _report():
    rows = [Fit("big", (2, 4), 4.0, 4.0, 7.9), Fit("big", (8, 1), 4.0, 4.0, 8.0),
            Fit("odd", (2, 4), 0.0, 0.0, 0.0, problem="cannot split"), Fit("odd", (8, 1), 1.0, 1.0, 2.0)]
    return FitReport(rows, device_gib=(16, 80), title="test report")


def test_draw_fit_stacks_each_part_and_names_each_device_size():
    fig = draw_fit(_report())
    assert isinstance(fig, Figure) and [ax.get_title() for ax in fig.axes] == ["big", "odd"]
    big = fig.axes[0]
    tops = sorted(round(p.get_y() + p.get_height(), 6) for bars in big.containers for p in bars)
    assert tops[-2:] == [15.9, 16.0]  # weights + gradients + optimizer state of each mesh
    ticks = [t.get_text() for t in big.get_xticklabels()]
    assert ticks == ["2 x 4\ntight\nfits", "8 x 1\ntight\nfits"]  # one word a line, in the label's order
    assert " ".join(fig.get_supxlabel().split()) == "mesh (batch x model), then its verdict on 16 GiB, then 80 GiB"
    assert big.get_xlabel() == ""  # a panel's own label only says why a mesh has no bar
    labels = [t.get_text() for t in fig.axes[1].texts]
    assert "cannot\nsplit" in labels and "4.0" in labels
    legend = [t.get_text() for t in fig.axes[-1].get_legend().get_texts()]
    assert "memory of a 16 GiB device" in legend and "memory of a 80 GiB device" in legend
    assert "its last 10%: tight" in legend
    assert {"weights", "gradients", "optimizer state"} <= set(legend)


def test_the_table_says_what_the_figure_says():
    report = _report()
    text = repr(report)
    assert "16 GiB device" in text and "tight" in text and "cannot split" in text
    assert [r.verdict(16) for r in report.rows] == ["tight", "tight", "cannot split", "fits"]
    assert "fits: at least 10% of the device left" in text
    assert not report.rows[0].fits(16) and report.rows[0].fits(80) and Fit("x", (1, 8), 9, 9, 9).verdict(16) == "no"


def test_no_label_of_the_figure_runs_into_another(overlapping_texts):
    rows = [Fit(name, shape, 4.0, 4.0, 8.0) for name in ("gemma_2b_en", "gemma_7b_en", "llama3_8b_en")
            for shape in ((1, 8), (2, 4), (8, 1))]
    assert overlapping_texts(draw_fit(FitReport(rows, device_gib=(16, 80), title="three models, three meshes"))) == []


def test_a_part_too_thin_to_see_is_named_on_its_bar(overlapping_texts):
    rows = [Fit("gemma", (2, 4), 4.0, 4.0, 8.0, activations=22.4, gathered=0.5, scratch=3.9)]
    report = FitReport(rows, device_gib=(16, 80), title="t", counted=("weights", "gradients", "optimizer",
                                                                        "activations", "gathered", "scratch"))
    fig = draw_fit(report)
    assert overlapping_texts(fig) == []  # its words stacked over a narrow bar, clear of the axis' numbers
    labels = [t.get_text() for t in fig.axes[0].texts]
    # 0.5 of an axis of 90 GiB: under a millimetre high; one word a line; the total already holds it
    assert labels == ["42.8\nincl.\n0.5\ngathered"] and rows[0].total == 42.8


def test_a_mesh_that_cannot_split_says_why_under_its_panel(overlapping_texts):
    from course_utils.memory.fit import CannotSplit

    key = CannotSplit("decoder_block_0/attention/key/kernel", (1, 2048, 256), 0, 1, ("model",), 4, others=35)
    rows = [Fit("gemma_2b_en", shape, 0.0, 0.0, 0.0, problem=str(key), split=key) for shape in ((1, 8), (2, 4))]
    rows += [Fit("gemma_2b_en", (8, 1), 1.2, 1.2, 2.3), Fit("gemma_7b_en", (2, 4), 4.0, 4.0, 8.0)]
    fig = draw_fit(FitReport(rows, device_gib=(16, 80), title="t"))
    two_b, seven_b = (" ".join(ax.get_xlabel().split()) for ax in fig.axes[:2])
    assert two_b.endswith("cannot split key/kernel: dim 0 of size 1 over model") and "cannot" not in seven_b
    assert overlapping_texts(fig) == []
    batch = CannotSplit("the batch", (6, 128), 0, 6, ("batch",), 4)
    odd = [Fit("m", (4, 2), 1, 1, 1, problem=str(batch), split=batch),
           Fit("m", (1, 8), 0, 0, 0, problem=str(key), split=key)]
    label = draw_fit(FitReport(odd, device_gib=(16,), title="t")).axes[0].get_xlabel()
    label = " ".join(label.split()).replace("/ ", "/")  # wrapped at spaces and after '/'
    assert "cannot split 4 x 2: the batch: dim 0 of size 6 over batch; 1 x 8: key/kernel: dim 0" in label
    assert str(batch) == "a batch of 6 does not split into 4 equal parts along 'batch'"
