from onnxcost.cli import main

main()
