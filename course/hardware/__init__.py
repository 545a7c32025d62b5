"""The hardware view: Nsight Compute, profiles, occupancy, and what "matches" means.

``ncu`` runs Nsight Compute and reads its CSV; ``profiler`` is ``course.profile`` (ncu on a
GPU, the tracer in the simulator); ``occupancy`` is the blocks-per-SM calculator;
``validation`` holds the rule by which the tracer's counts are compared with the hardware's.
"""
