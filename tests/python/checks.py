"""What the Python tests of remat.torch share: the whole step's peak as the allocator measures
it, and a profile retimed so that schedules run the blocks' options."""

import gc

import remat
import remat.torch as rt


def whole_step_peak(step, x):
    """The peak of `step()` (a training step on input `x`) as the allocator measures it, above
    what was allocated before it, `x` included: the CPU meter, or the CUDA allocator's
    statistics, read through remat.torch's meter of the device, whose peak() counts the windows a
    step opens per op."""
    meter = rt._meter_for(x)
    gc.collect()
    meter.sync()
    meter.reset_peak()
    before = meter.current()
    step()
    meter.sync()
    return meter.peak() - before + x.numel() * x.element_size()


def favour_options(m):
    """m's profile at its last input shape with each option's times made those of plain
    recording (its memory as measured), so that the solver records with an option wherever its
    smaller tape saves a recomputation: the schedules then run options, whose results and peaks
    the tests check."""
    entry = m._current[0]
    c = entry.profile.chain

    def timed_as(o, plain):
        return remat.StageOption(forward_time=plain.forward_time,
                                 backward_time=plain.backward_time, tape_size=o.tape_size,
                                 forward_overhead=o.forward_overhead,
                                 backward_overhead=o.backward_overhead)

    stages = [remat.Stage(forward_time=st.forward_time, backward_time=st.backward_time,
                          output_size=st.output_size, tape_size=st.tape_size,
                          forward_overhead=st.forward_overhead,
                          backward_overhead=st.backward_overhead,
                          recording_overhead=st.recording_overhead,
                          options=[timed_as(o, st.options[0]) for o in st.options])
              for st in c.stages]
    entry.profile.chain = remat.Chain(stages, input_size=c.input_size, loss_time=c.loss_time,
                                      loss_overhead=c.loss_overhead, time_unit="ms",
                                      memory_unit="bytes")
    entry.schedules.clear()
    entry.store_all_result = None
    entry.least_budgets.clear()
