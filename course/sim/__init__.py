"""The simulator's microscope: what numba's CUDA simulator lacks, and what it can show.

``warp`` (+ ``warp_bits``, and ``warp_rendezvous`` where lanes meet) adds warp shuffles and
votes to the simulator; ``trace`` records every memory access of a simulated launch (through
``trace_arrays``: views of an array are traced too); ``trace_analysis`` counts 32-byte
sectors and bank wavefronts from those records - the definitions the tune and predict
exercises use - ``trace_problems`` finds races and uninitialized reads in them, and
``trace_figures`` counts what a tune exercise's figure is made of; ``counting`` gives arrays and shared memory that count
element reads (lessons 03 and 04).
"""
