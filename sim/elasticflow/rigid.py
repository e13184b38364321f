"""placeholder"""
def run_las(*a): raise NotImplementedError
def run_lease(*a): raise NotImplementedError
