"""Checks that train_step's arena is at most RATIO times grad's, from the
`entry NAME arena BYTES` lines of `megc --emit=megrt`."""
import re
import sys

text = open(sys.argv[1]).read()
ratio = float(sys.argv[2])
arena = {name: int(size) for name, size in
         re.findall(r"^entry (\w+) arena (\d+)", text, re.M)}
grad, step = arena["grad"], arena["train_step"]
print(f"grad arena {grad}, train_step arena {step}, ratio {step / grad:.3f}")
if step > ratio * grad:
    sys.exit(f"train_step's arena is {step / grad:.3f} times grad's, "
             f"more than {ratio}")
